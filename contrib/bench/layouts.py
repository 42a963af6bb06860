"""What a boundary would write to SQLite's WAL in other table layouts: the rows of a real
run (1,000 messages over HTTP, as payload.py builds it) written again, one transaction a
boundary as runpoint writes them, into fresh files laid out otherwise, counting the pages
each commit puts in the WAL (walpages.py).

    .venv/bin/python contrib/bench/layouts.py [--size 1000] [--page-sizes 4096 1024] [--runs 1]

A layout changes where a boundary's rows go, never what they hold: the documents are the
run's own bytes. "today" is the migrated schema's own tables (their SQL read from the
database the run was built in) and statements (plugins/sql/sqlite.py's `write_save`).
"payload" is the documents a boundary stores (messages, checkpoint, events); the figure
is the WAL's bytes per payload byte (payload.py's "disk" adds the checkpoints' copy into
the database file, about 6% more)."""

from __future__ import annotations

import argparse
import asyncio
import math
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import NamedTuple

from payload import build
from providers import vendor_server
from walpages import commits

_OWN = ("messages", "checkpoints", "run_events")


class Boundary(NamedTuple):
    messages: list[tuple[int, str, bytes, int]]  # idx, role, data, event_seq
    checkpoint: tuple[int, bytes, int]  # message_index, data, event_seq
    events: list[tuple[int, bytes]]  # seq, data

    @property
    def payload(self) -> int:
        rows = [d for _, _, d, _ in self.messages] + [d for _, d in self.events]
        return sum(map(len, rows)) + len(self.checkpoint[1])


class Layout(NamedTuple):
    name: str
    tables: str  # in place of today's messages, checkpoints and run_events ("": today's)
    # how the rows are keyed: "text" (run_id, index), "int" (one integer: the run's number
    # and the index), "log" (one row a boundary, so keyed), "time" (one row a boundary,
    # keyed in the order written, with a key index on the run's number and the index)
    keys: str
    events: str = "text"  # how the event log is keyed, if it is a table of its own
    session: bool = True  # the session's event cursor is moved at each boundary
    run: bool = True  # the run's row is rewritten at each boundary


_INT = """CREATE TABLE messages (k INTEGER PRIMARY KEY, role TEXT, data BLOB, event_seq INT);
CREATE TABLE checkpoints (k INTEGER PRIMARY KEY, data BLOB, event_seq INT);"""
_EVENTS = "CREATE TABLE run_events (k INTEGER PRIMARY KEY, data BLOB);"
_LOG = "CREATE TABLE boundaries (k INTEGER PRIMARY KEY, data BLOB);"
_TIME = """CREATE TABLE boundaries (k INTEGER PRIMARY KEY, run INT, idx INT, data BLOB);
CREATE UNIQUE INDEX ix_boundaries ON boundaries (run, idx);"""
LAYOUTS = (
    Layout("today", "", "text"),
    Layout(
        "messages, checkpoints keyed by one integer (no key index)",
        _INT + "CREATE TABLE run_events (run_id TEXT, seq INT, data BLOB,"
        " PRIMARY KEY (run_id, seq)) WITHOUT ROWID;",
        "int",
    ),
    Layout("... and events too", _INT + _EVENTS, "int", "int"),
    Layout("... and no session cursor moved", _INT + _EVENTS, "int", "int", session=False),
    Layout("one row a boundary (integer key)", _LOG, "log"),
    Layout("one row a boundary, no session cursor moved", _LOG, "log", session=False),
    Layout("one row a boundary and nothing else", _LOG, "log", session=False, run=False),
    Layout(
        "one row a boundary in the order written, and nothing else",
        _TIME,
        "time",
        session=False,
        run=False,
    ),
)
_KEY = 1 << 32


Born = list[tuple[str, dict[str, object]]]  # the rows of a run's session and run, by table


def boundaries(path: str) -> tuple[dict[str, str], Born, list[Boundary]]:
    """Today's SQL of the tables, the rows the run was born with, and its boundaries."""
    with closing(sqlite3.connect(path)) as db:
        db.row_factory = sqlite3.Row
        schema = dict(
            db.execute(
                "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN"
                " ('sessions', 'runs', 'messages', 'checkpoints', 'run_events')"
            ).fetchall()
        )
        born = [
            (table, dict(row))
            for table in ("sessions", "runs")
            for row in db.execute(f"SELECT * FROM {table}").fetchall()
        ]
        messages = db.execute(
            "SELECT idx, role, data, event_seq FROM messages ORDER BY idx"
        ).fetchall()
        marks = db.execute(
            "SELECT message_index, data, event_seq FROM checkpoints ORDER BY message_index"
        ).fetchall()
        events = db.execute("SELECT seq, data FROM run_events ORDER BY seq").fetchall()
    # the run's birth wrote its input and its first events; each boundary the messages
    # before its checkpoint in the session's log, and one row of events
    done, rest = [], messages[1:]
    for n, mark in enumerate(marks):
        mine = [m for m in rest if m[3] < mark[2]]
        rest = rest[len(mine) :]
        done.append(Boundary(mine, mark, events[n + 1 : n + 2]))
    done[-1].events.extend(events[len(marks) + 1 :])
    return schema, born, done


def replay(
    layout: Layout,
    schema: dict[str, str],
    born: Born,
    written: Sequence[Boundary],
    page_size: int,
    path: str,
    runs: int,
) -> tuple[int, float]:
    """The WAL pages `written` takes in `layout` for each of `runs` runs, their boundaries
    in turns, one commit each; and what reading a run back costs (`_read_ms`)."""
    with closing(sqlite3.connect(path, isolation_level=None)) as db:
        for pragma in (
            f"page_size={page_size}",
            "auto_vacuum=INCREMENTAL",
            "journal_mode=WAL",
            "synchronous=NORMAL",
            "wal_autocheckpoint=0",
        ):
            db.execute(f"PRAGMA {pragma}")
        for name, sql in schema.items():
            if not (layout.tables and name in _OWN):
                db.execute(sql)
        db.executescript(layout.tables)
        ids = [_born(db, born, number) for number in range(1, runs + 1)]
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the WAL starts over
        (state,) = db.execute("SELECT state FROM runs").fetchone()
        for b in written:
            for number, (run_id, session_id) in enumerate(ids, 1):
                db.execute("BEGIN IMMEDIATE")
                if layout.run:
                    db.execute(
                        "UPDATE runs SET revision = revision + 1, state = ?, lease_owner = ?,"
                        " lease_expires_at = ?, recoveries = 0 WHERE run_id = ?",
                        (state, "worker", 1.0, run_id),
                    )
                if layout.session:
                    db.execute(
                        "UPDATE sessions SET event_seq = event_seq + ? WHERE session_id = ?"
                        " RETURNING event_seq",
                        (len(b.messages) + 1, session_id),
                    ).fetchall()
                _insert(db, layout, run_id, number, b)
                db.execute("COMMIT")
        pages = sum(map(len, commits(path).pages))
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return pages, _read_ms(db, layout.keys, ids[0][0])


def _born(db: sqlite3.Connection, born: Born, number: int) -> tuple[str, str]:
    """The run's session and run rows again, under new ids (random, as runpoint's are)."""
    run_id, session_id = str(uuid.uuid4()), str(uuid.uuid4())
    for table, row in born:
        new = row | {"session_id": session_id}
        if table == "runs":
            new |= {"seq": number, "run_id": run_id}
        names = ", ".join(new)
        db.execute(
            f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(new))})", [*new.values()]
        )
    return run_id, session_id


_READS = {  # every message and checkpoint of the run, in order (a get-run and a timeline)
    "text": (
        "SELECT idx, role, data FROM messages WHERE run_id = ? AND idx >= 0 ORDER BY idx",
        "SELECT message_index, data FROM checkpoints WHERE run_id = ? AND message_index >= 0"
        " ORDER BY message_index",
    ),
    "int": (
        "SELECT k, role, data FROM messages WHERE k >= ? AND k < ? ORDER BY k",
        "SELECT k, data FROM checkpoints WHERE k >= ? AND k < ? ORDER BY k",
    ),
    "log": ("SELECT k, data FROM boundaries WHERE k >= ? AND k < ? ORDER BY k",),
    "time": ("SELECT idx, data FROM boundaries WHERE run = ? AND idx >= 0 ORDER BY idx",),
}


def _read_ms(db: sqlite3.Connection, keys: str, run_id: str, times: int = 20) -> float:
    """SQLite's CPU to read the run's messages and checkpoints, the best of 5 (ms)."""
    bounds = {"text": (run_id,), "time": (1,)}.get(keys, (_KEY, 2 * _KEY))  # the first run
    best = math.inf
    for _ in range(5):
        start = time.process_time()
        for _ in range(times):
            for sql in _READS[keys]:
                db.execute(sql, bounds).fetchall()
        best = min(best, (time.process_time() - start) / times)
    return best * 1_000


def _insert(db: sqlite3.Connection, layout: Layout, run_id: str, number: int, b: Boundary) -> None:
    index, mark, seq = b.checkpoint
    key = _KEY * number  # the run's rows keyed by one integer: its number above the index
    if layout.keys in ("log", "time"):
        data = b"".join([d for _, _, d, _ in b.messages] + [mark] + [d for _, d in b.events])
        if layout.keys == "log":
            db.execute("INSERT INTO boundaries VALUES (?, ?)", (key + index, data))
        else:
            db.execute("INSERT INTO boundaries VALUES (NULL, ?, ?, ?)", (number, index, data))
        return
    if layout.keys == "text":
        db.executemany(
            "INSERT INTO messages (run_id, idx, role, data, event_seq) VALUES (?, ?, ?, ?, ?)",
            [(run_id, *m) for m in b.messages],
        )
        db.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?)", (run_id, index, mark, seq))
    else:
        db.executemany(
            "INSERT INTO messages VALUES (?, ?, ?, ?)",
            [(key + i, role, d, s) for i, role, d, s in b.messages],
        )
        db.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", (key + index, mark, seq))
    if layout.events == "int":
        db.executemany("INSERT INTO run_events VALUES (?, ?)", [(key + s, d) for s, d in b.events])
    else:
        db.executemany("INSERT INTO run_events VALUES (?, ?, ?)", [(run_id, *e) for e in b.events])


async def main(size: int, page_sizes: list[int], runs: int) -> None:
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "run.db")
        await build(size, f"sqlite:///{source}", None)  # its rows are replayed
        schema, born, written = boundaries(str(source))
        payload = sum(b.payload for b in written)
        print(
            f"{len(written)} boundaries of a {size:,}-message run, {payload / len(written):,.0f}"
            f" bytes of documents each; {runs} such runs, their boundaries in turns"
        )
        print(f"{'page':>5} {'pages/boundary':>15} {'WAL/payload':>12} {'read ms':>8}  layout")
        for page_size in page_sizes:
            for n, layout in enumerate(LAYOUTS):
                pages, read = replay(
                    layout,
                    schema,
                    born,
                    written,
                    page_size,
                    str(Path(tmp, f"{page_size}_{n}.db")),
                    runs,
                )
                wal = pages * (page_size + 24)
                per, ratio = pages / len(written) / runs, wal / payload / runs
                print(f"{page_size:>5} {per:>15.2f} {ratio:>12.1f} {read:>8.2f}  {layout.name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000)
    parser.add_argument("--page-sizes", nargs="+", type=int, default=[4096, 1024])
    parser.add_argument("--runs", type=int, default=1, help="runs written in turns")
    args = parser.parse_args()
    asyncio.run(main(args.size, args.page_sizes, args.runs))
