"""`runpoint db prune` and `runpoint db backup`: retention once from the command line, and
an online copy of a SQLite database (docs/operations.md, "Retention and backups");
`runpoint db encrypt` and `runpoint db rotate-key`, online, and `runpoint team erase`
(docs/operations.md, "Encryption at rest")."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from runpoint.adapters.serving import (
    StartupError,
    load_agents,
    opened,
    retention_of,
)
from runpoint.adapters.settings import DEFAULTS, add_options

if TYPE_CHECKING:
    from runpoint.core.keyring import Keyring
    from runpoint.seams.storage import Resealed, Storage

RETAIN = ("retain_runs", "retain_checkpoints", "retain_events")
RESEAL_BATCH = 500
ERASE_BATCH = 50


def add_db_commands(db: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    prune = db.add_parser("prune", help="apply the retention policies once, and say what went")
    add_options(prune, "db", "app", *RETAIN)
    prune.add_argument("--dry-run", action="store_true", help="remove nothing: say what would go")
    backup = db.add_parser("backup", help="copy a SQLite database online, while it serves")
    backup.add_argument("path", help="the copy's file (written whole, or not at all)")
    add_options(backup, "db")
    encrypt = db.add_parser("encrypt", help="encrypt the documents stored in the clear, online")
    rotate = db.add_parser("rotate-key", help="seal every document under the keyring's first key")
    rotate.add_argument(
        "--check", action="store_true", help="change nothing: list the rows not under it"
    )
    for parser in (encrypt, rotate):
        add_options(parser, "db", "encryption_keys")
        parser.add_argument(
            "--batch", type=int, default=RESEAL_BATCH, help="rows read and written at a time"
        )


def add_team_commands(team: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    erase = team.add_parser(
        "erase", help="destroy a team's key, so its stored data never reads again; then remove it"
    )
    erase.add_argument("team", help="the team's id")
    add_options(erase, "db", "encryption_keys")
    erase.add_argument("--batch", type=int, default=ERASE_BATCH, help="sessions removed at a time")


def encrypted(args: argparse.Namespace) -> tuple[Keyring, Storage]:
    """The keyring, and the storage of `--db` sealing with it (not yet open, `Encrypted`)."""
    from runpoint.core.sealing import Codec
    from runpoint.seams.host import PluginHost
    from runpoint.seams.storage import Encrypted

    host = PluginHost()
    keyring = host.keyring(args.encryption_keys)
    if keyring is None:
        raise StartupError(
            "no keyring: give --encryption-keys (or $RUNPOINT_ENCRYPTION_KEYS_FILE), or "
            "install a plugin that registers keys"
        )
    storage = host.storage(args.db)
    if not isinstance(storage, Encrypted):
        raise StartupError(f"--db {args.db}: this storage cannot encrypt")
    storage.encrypt_with(Codec(keyring))
    return keyring, storage


def erase_team(args: argparse.Namespace) -> tuple[list[str], int]:
    """Destroy a team's key, then remove its rows a batch at a time (run again after a
    kill, it erases again and goes on): the lines to print, and the exit status."""
    from runpoint.seams.storage import ErasesTeams

    _, storage = encrypted(args)
    if not isinstance(storage, ErasesTeams):
        raise StartupError(f"--db {args.db}: this storage cannot erase a team")

    async def run() -> list[str]:
        async with opened(storage, args.db):
            if not await storage.erase_team(args.team):
                return []
            removed = 0
            while (done := await storage.remove_erased(args.batch)) is not None:
                removed += done
        return [
            f"team {args.team!r} erased: its key is destroyed, so its stored documents can "
            "never be read again (servers drop the key within seconds)",
            f"removed its {removed} sessions, with their runs, approvals and schedules",
        ]

    lines = asyncio.run(run())
    if not lines:
        return [f"runpoint team erase: --db {args.db} holds nothing of team {args.team!r}"], 1
    return lines, 0


def reseal(args: argparse.Namespace, *, encrypt: bool) -> tuple[list[str], int]:
    """Seal the stored documents under the keyring's first key (`encrypt`: those in the
    clear too): a line per row that would not, then what was done, and the exit status."""
    from runpoint.seams.storage import Encrypted

    keyring, storage = encrypted(args)
    assert isinstance(storage, Encrypted)
    check = getattr(args, "check", False)

    async def run() -> Resealed:
        async with opened(storage, args.db):
            return await storage.reseal(encrypt=encrypt, check=check, batch=args.batch)

    done = asyncio.run(run())
    key = repr(keyring.current)
    if check:
        summary = (
            f"{len(done.problems)} stored documents are not under their team's key, or team "
            f"keys not wrapped under key {key}"
        )
    else:
        summary = (
            f"wrapped {done.rewrapped} team keys anew under key {key}, and sealed "
            f"{done.resealed} stored documents under their team's key"
        )
        if done.problems:
            summary += f"; {len(done.problems)} could not be (listed above)"
        elif encrypt:
            summary += "; the database is encrypted: rows in the clear are refused from now on"
        else:
            summary += "; every one is under it: the other keys may be removed"
    return [*done.problems, summary], 1 if done.problems else 0


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
