"""What `runpoint serve` is told, as one value: each setting is a field of `Settings` with
its default (stated here and nowhere else), its flag and its `RUNPOINT_` variable. A flag
wins over its variable, a variable over the default. The value is handed to the app and
to each worker process; nothing writes it into the environment.

A new setting is one field: `name: type = setting(default, "help")` gives it the flag
`--name` and the variable `RUNPOINT_NAME`."""

from __future__ import annotations

import argparse
import os
from dataclasses import Field, dataclass, field, fields
from typing import Any

from runpoint.adapters.logs import FORMATS
from runpoint.durable import LEASE_SECONDS, SWEEP_BATCH, SWEEP_SECONDS

LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
ACCESS_HELP = """With no API keys and no JWT key the server is open: every request acts as one
default team. Set ${} to accept HS256 JWTs signed with it."""


@dataclass(frozen=True)
class Option:
    """How a setting is given. A secret has no flag: command lines are public."""

    help: str
    variable: str | None = None  # RUNPOINT_ and the field's name, upper case, if None
    secret: bool = False
    choices: tuple[str, ...] | None = None
    access: bool = False  # one of the access options, listed together


def setting(default: Any, help: str, **option: Any) -> Any:
    """A field of `Settings` (see `Option` for `option`)."""
    return field(
        default=default,
        repr=not option.get("secret", False),
        metadata={"option": Option(help, **option)},
    )


@dataclass(frozen=True, kw_only=True)
class Settings:
    app: str = setting("runpoint.plugins.demo:agents", "agents to serve, as module:attribute")
    db: str = setting(
        "runpoint.db",
        "a SQLite file's path, sqlite:///PATH, postgresql://USER@HOST/NAME or memory:",
    )
    host: str = setting("127.0.0.1", "address to listen on")
    port: int = setting(7777, "port to listen on")
    workers: int = setting(1, "server processes")
    root_path: str | None = setting(
        None, "the path prefix a proxy serves runpoint under (/rp), whether it strips it or not"
    )
    log_level: str = setting("info", "least severe log messages shown", choices=LOG_LEVELS)
    log_format: str = setting(
        "text",
        "log lines as text, or as JSON objects (one a line) for machines",
        choices=FORMATS,
    )
    keepalive_seconds: float = setting(
        15.0, "an event stream quiet this long sends a keep-alive comment"
    )
    lease_seconds: float = setting(
        LEASE_SECONDS,
        "how long a run executing here is held before another process may resume it",
    )
    api_keys: str | None = setting(
        None,
        "a YAML file of API keys' SHA-256s and principals",
        variable="RUNPOINT_API_KEYS_FILE",
        access=True,
    )
    jwt_public_key: str | None = setting(
        None,
        "a PEM file: accept JWTs it verifies",
        variable="RUNPOINT_JWT_PUBLIC_KEY_FILE",
        access=True,
    )
    jwt_audience: str | None = setting(None, "JWTs must carry this `aud`", access=True)
    jwt_issuer: str | None = setting(None, "JWTs must carry this `iss`", access=True)
    rate_limit: str | None = setting(
        None,
        "requests per principal, and failed authentications per client address, e.g. 600/minute",
        access=True,
    )
    max_body_bytes: int = setting(10**7, "largest request body, bytes", access=True)
    cors_origins: str | None = setting(
        None, "origins browsers may call from, comma-separated, or * for any", access=True
    )
    allow_unauthenticated: bool = setting(
        False, "serve an address other than loopback with no authentication", access=True
    )
    otel: bool = setting(
        False,
        "send OpenTelemetry traces, set up by the standard OTEL_* variables (needs runpoint[otel])",
    )
    retain_runs: str | None = setting(
        None, "remove a finished run this long after it finished, e.g. 30d, 12h, 90m (or never)"
    )
    retain_checkpoints: str | None = setting(
        None, "keep this many last checkpoints of a finished run, its end always (or all)"
    )
    retain_events: str | None = setting(
        None, "drop the event log of a run this long after it finished (or never)"
    )
    retain_keys: str = setting(
        "24h",  # runpoint.durable.RETAIN_KEYS
        "remove an answered Idempotency-Key this long after it was first sent (or never)",
    )
    sweep_seconds: float = setting(SWEEP_SECONDS, "seconds between retention sweeps")
    sweep_batch: int = setting(SWEEP_BATCH, "finished runs a retention sweep reads at most")
    encryption_keys: str | None = setting(
        None,
        "a file of encryption keys ('id base64-key' a line, the sealing key first): "
        "store what users, tools and models wrote encrypted",
        variable="RUNPOINT_ENCRYPTION_KEYS_FILE",
    )
    jwt_secret: str | None = setting(None, "accept HS256 JWTs signed with it", secret=True)

    @classmethod
    def of(cls, args: argparse.Namespace) -> Settings:
        """The settings `args` (parsed by a parser given `add_options`) say, and the
        secrets' variables."""
        values: dict[str, Any] = {
            f.name: os.environ.get(variable(f)) if option(f).secret else getattr(args, f.name)
            for f in fields(cls)
        }
        return cls(**values)

    @classmethod
    def from_environment(cls) -> Settings:
        """The settings the `RUNPOINT_` variables say (a bad one is a usage error)."""
        parser = argparse.ArgumentParser(prog="runpoint serve")
        add_options(parser)
        return cls.of(parser.parse_args([]))


def option(f: Field[Any]) -> Option:
    described: Option = f.metadata["option"]
    return described


def variable(f: Field[Any]) -> str:
    return option(f).variable or f"RUNPOINT_{f.name.upper()}"


DEFAULTS = Settings()
VARIABLES = {f.name: variable(f) for f in fields(Settings)}


def add_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """A flag for each setting (those of `names`, if given) whose default is its variable's
    value, if set; the access options in a group of their own."""
    access: argparse._ActionsContainer | None = None
    for f in fields(Settings):
        described, name = option(f), variable(f)
        if described.secret or (names and f.name not in names):
            continue
        group: argparse._ActionsContainer = parser
        if described.access:
            help_ = ACCESS_HELP.format(VARIABLES["jwt_secret"])
            access = access or parser.add_argument_group("access", help_)
            group = access
        flag = f"--{f.name.replace('_', '-')}"
        if isinstance(f.default, bool):
            group.add_argument(
                flag,
                action="store_true",
                default=is_set(name),
                help=f"{described.help} (${name})",
            )
            continue
        shown = f"; default: {f.default}" if f.default is not None else ""
        group.add_argument(
            flag,
            type=str if f.default is None else type(f.default),
            choices=described.choices,
            # argparse converts a string default with `type`: a bad $VARIABLE is a usage error
            default=os.environ.get(name, f.default),
            help=f"{described.help} (${name}{shown})",
        )


def is_set(name: str) -> bool:
    """Whether a yes-or-no environment variable says yes."""
    return os.environ.get(name, "").lower() in ("1", "true", "yes")
