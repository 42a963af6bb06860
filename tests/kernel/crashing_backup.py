"""A backup that dies midway: `python -m tests.kernel.crashing_backup DB PATH` backs DB up to
PATH as `runpoint db backup` does, but a page at a time, and freezes after the first page
was copied, for the parent to kill it. It prints `frozen` when it froze there."""

from __future__ import annotations

import sqlite3
import sys
import time
from typing import Any

from runpoint.adapters import db_commands

connect = sqlite3.connect


class OnePageAtATime:
    """The database copied from, whose backup stops for good after its first page."""

    def __init__(self, source: sqlite3.Connection) -> None:
        self.source = source

    def backup(self, target: sqlite3.Connection) -> None:
        def progress(status: int, remaining: int, total: int) -> None:
            if remaining:
                print("frozen", flush=True)
                time.sleep(600)

        self.source.backup(target, pages=1, progress=progress)

    def close(self) -> None:
        self.source.close()


def frozen_source(database: str, *args: Any, **kwargs: Any) -> Any:
    found = connect(database, *args, **kwargs)
    return OnePageAtATime(found) if "mode=ro" in str(database) else found


if __name__ == "__main__":
    sqlite3.connect = frozen_source  # type: ignore[assignment]
    db_commands.backup(*sys.argv[1:])
