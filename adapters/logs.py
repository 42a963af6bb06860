"""How `runpoint serve` logs: every line on stderr, runpoint's, uvicorn's and any
library's alike, as text for people or as one JSON object per line for machines.

A line's data (a request's id and status, a run's ids) is given as `fields` (the
`extra={"fields": {...}}` of a logging call): text appends them as `key=value`, quoting a
value that holds a space, a quote or a control character so that a line stays one line;
JSON makes each a key of the object.
"""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")
_BARE = re.compile(r'[^\s"=\\]+')  # a value written as it is; any other is quoted


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(levelname)-9s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = " ".join(f"{key}={_text(value)}" for key, value in _fields(record).items())
        if not fields:
            return line
        head, newline, traceback = line.partition("\n")  # fields end the first line
        return f"{head} {fields}{newline}{traceback}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_fields(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = getattr(record, "fields", {})
    return fields


def _text(value: object) -> str:
    text = "-" if value is None else str(value)
    return text if _BARE.fullmatch(text) and text.isprintable() else json.dumps(text)


def config(level: str, format: str) -> dict[str, Any]:
    """The logging configuration (`logging.config.dictConfig`'s) for `level` (uvicorn's
    names: "trace" is debug here) and `format` ("text" or "json"). uvicorn applies it in
    each worker process."""
    level = "DEBUG" if level == "trace" else level.upper()
    formatter = TextFormatter if format == "text" else JsonFormatter
    stderr = {
        "class": "logging.StreamHandler",
        "formatter": "runpoint",
        "stream": "ext://sys.stderr",
    }
    ours = {"handlers": ["stderr"], "level": level, "propagate": False}
    return {
        "version": 1,
        "disable_existing_loggers": False,  # runpoint's modules made theirs at import
        "formatters": {"runpoint": {"()": formatter}},
        "handlers": {"stderr": stderr},
        "loggers": {"runpoint": ours, "uvicorn": ours},
        "root": {"handlers": ["stderr"], "level": "WARNING"},  # libraries' warnings
    }
