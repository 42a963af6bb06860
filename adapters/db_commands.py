"""`runpoint db prune` and `runpoint db backup`: retention once from the command line, and
an online copy of a SQLite database (docs/operations.md, "Retention and backups")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sqlite3
from pathlib import Path

from runpoint.adapters.serving import (
    StartupError,
    load_agents,
    opened,
    retention_of,
)
from runpoint.adapters.settings import DEFAULTS, add_options

RETAIN = ("retain_runs", "retain_checkpoints", "retain_events")


def add_db_commands(db: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prune = db.add_parser("prune", help="apply the retention policies once, and say what went")
    add_options(prune, "db", "app", *RETAIN)
    prune.add_argument("--dry-run", action="store_true", help="remove nothing: say what would go")
    backup = db.add_parser("backup", help="copy a SQLite database online, while it serves")
    backup.add_argument("path", help="the copy's file (written whole, or not at all)")
    add_options(backup, "db")


def prune(args: argparse.Namespace) -> list[str]:
    """Sweep every finished run once: a line per run removed, then the totals."""
    from runpoint.durable.retention import Sweeper
    from runpoint.seams.host import PluginHost

    settings = dataclasses.replace(DEFAULTS, **{name: getattr(args, name) for name in RETAIN})
    try:
        server = retention_of(settings)
        agents = {a.id: a.retention for a in load_agents(args.app)}
    except ValueError as exc:
        raise StartupError(str(exc)) from exc
    host = PluginHost()

    async def sweep() -> list[str]:
        async with opened(host.storage(args.db), args.db) as storage:
            sweeper = Sweeper(storage, host, server, agents)
            removed = await sweeper.sweep_all(dry_run=args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        return [f"{verb} run {run_id}" for run_id in removed.run_ids] + [
            f"{verb} {removed.runs} runs, {removed.sessions} sessions, {removed.messages} "
            f"messages, {removed.checkpoints} checkpoints, {removed.events} events "
            f"({removed.size} bytes of documents)"
        ]

    return asyncio.run(sweep())


def backup(db: str, path: str) -> str:
    """Copy the SQLite database `db` to `path` with SQLite's online backup API: one read
    transaction (writers go on meanwhile, in WAL mode), into a temporary file beside
    `path`, renamed to it once complete, so a backup killed midway leaves no file there."""
    from sqlalchemy.engine import make_url

    from runpoint.seams.host import database_url

    url = make_url(database_url(db))
    if url.get_backend_name() != "sqlite" or not url.database:
        raise StartupError(
            f"--db {db}: backs up SQLite files only; for PostgreSQL use pg_dump "
            "(docs/operations.md, 'Backups')"
        )
    if not Path(url.database).is_file():
        raise StartupError(f"--db {db}: no such database file")
    target = Path(path).resolve()
    if not target.parent.is_dir():
        raise StartupError(f"{path}: no directory {target.parent}")
    partial = target.with_name(f".{target.name}.partial")
    partial.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{url.database}?mode=ro", uri=True)
    try:
        with contextlib.closing(sqlite3.connect(partial)) as copy:
            source.backup(copy)  # all pages in one step: one consistent snapshot
        with open(partial, "rb") as written:
            os.fsync(written.fileno())
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    return f"{db}: backed up to {target} ({target.stat().st_size} bytes)"
