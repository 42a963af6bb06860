"""`Storage` on SQLAlchemy Core with an async engine."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import msgspec
from sqlalchemy import Table, and_, delete, event, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from runpoint.errors import Conflict
from runpoint.plugins.sql.schema import checkpoints, messages, metadata, runs, sessions
from runpoint.types import Checkpoint, Message, Role, Run, RunStatus, Segment, Session, Usage

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode


class _RunState(msgspec.Struct, omit_defaults=True):
    """The fields of a run that change while it goes."""

    status: RunStatus
    message_count: int
    updated_at: float
    usage: Usage
    content: str | None = None
    error: str | None = None
    model: str | None = None
    last_checkpoint_at_message_index: int | None = None


def _state(run: Run) -> _RunState:
    return _RunState(**{f: getattr(run, f) for f in _RunState.__struct_fields__})


_decode_run = msgspec.json.Decoder(Run).decode
_decode_state = msgspec.json.Decoder(_RunState).decode
_RUN_COLUMNS = (runs.c.data, runs.c.state)
_DRIVERS = {"sqlite": "sqlite+aiosqlite"}
_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",  # durable at each commit in WAL mode, short of power loss
    "PRAGMA busy_timeout=10000",
)


class SqlStorage:
    def __init__(self, url: str) -> None:
        parsed = make_url(url)
        if "+" not in parsed.drivername:
            parsed = parsed.set(drivername=_DRIVERS.get(parsed.drivername, parsed.drivername))
        self.url = parsed
        self.engine = create_async_engine(parsed)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_pragmas)
        # SQLite has one writer: queue writers here instead of failing on a busy database.
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        self.bytes_written = 0  # document bytes handed to the database, for benchmarks

    async def open(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(metadata.create_all)

    async def close(self) -> None:
        await self.engine.dispose()

    # -- sessions ------------------------------------------------------------------

    async def create_session(self, session: Session, runs_: Sequence[Run] = ()) -> None:
        async with self._write() as conn:
            await conn.execute(insert(sessions), [self._session_row(session)])
            if runs_:
                await conn.execute(insert(runs), [self._run_row(r) for r in runs_])

    async def get_session(self, session_id: str) -> Session | None:
        query = select(sessions.c.data).where(sessions.c.session_id == session_id)
        return await self._one(query, Session)

    async def list_sessions(self, *, limit: int, offset: int) -> list[Session]:
        query = (
            select(sessions.c.data)
            .order_by(sessions.c.created_at.desc(), sessions.c.session_id)
            .limit(limit)
            .offset(offset)
        )
        return await self._all(query, Session)

    async def delete_session(self, session_id: str) -> bool:
        async with self._write() as conn:
            forks = await conn.scalars(
                select(sessions.c.session_id).where(sessions.c.forked_from_session_id == session_id)
            )
            if fork_ids := forks.all():
                # their runs read this session's messages (copy-on-write)
                raise Conflict(
                    f"session {session_id} has forks that share its history: "
                    f"{', '.join(fork_ids)}; delete them first"
                )
            run_ids = select(runs.c.run_id).where(runs.c.session_id == session_id)
            await conn.execute(delete(messages).where(messages.c.run_id.in_(run_ids)))
            await conn.execute(delete(checkpoints).where(checkpoints.c.run_id.in_(run_ids)))
            await conn.execute(delete(runs).where(runs.c.session_id == session_id))
            result = await conn.execute(delete(sessions).where(sessions.c.session_id == session_id))
            return bool(result.rowcount)

    # -- runs ------------------------------------------------------------------------

    async def create_runs(self, runs_: Sequence[Run]) -> None:
        async with self._write() as conn:
            await conn.execute(insert(runs), [self._run_row(r) for r in runs_])

    async def get_run(self, run_id: str) -> Run | None:
        found = await self._runs(select(*_RUN_COLUMNS).where(runs.c.run_id == run_id))
        return found[0] if found else None

    async def list_runs(self, session_id: str) -> list[Run]:
        query = select(*_RUN_COLUMNS).where(runs.c.session_id == session_id)
        return await self._runs(query.order_by(runs.c.seq))

    async def latest_run(self, session_id: str) -> Run | None:
        query = select(*_RUN_COLUMNS).where(runs.c.session_id == session_id)
        found = await self._runs(query.order_by(runs.c.seq.desc()).limit(1))
        return found[0] if found else None

    async def save(
        self, run: Run, messages_: Sequence[Message], checkpoint: Checkpoint | None
    ) -> None:
        first = run.message_count - len(messages_)
        async with self._write() as conn:
            await conn.execute(
                update(runs)
                .where(runs.c.run_id == run.run_id)
                .values(status=run.status.value, state=self._count(_encode(_state(run))))
            )
            if messages_:
                rows = [
                    {
                        "run_id": run.run_id,
                        "idx": first + i,
                        "role": m.role,
                        "data": self._count(_encode(m)),
                    }
                    for i, m in enumerate(messages_)
                ]
                await conn.execute(insert(messages), rows)
            if checkpoint is not None:
                data = self._count(_encode(checkpoint))
                row = {
                    "run_id": checkpoint.run_id,
                    "message_index": checkpoint.message_index,
                    "data": data,
                }
                upsert = self._insert(checkpoints).values(row)
                await conn.execute(
                    upsert.on_conflict_do_update(
                        index_elements=["run_id", "message_index"], set_={"data": data}
                    )
                )

    # -- transcripts -----------------------------------------------------------------

    async def read_messages(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[Message]:
        ranges = [
            and_(
                messages.c.run_id == s.run_id,
                messages.c.idx >= max(s.start, start),
                messages.c.idx < (upto if s.end is None else min(s.end, upto)),
            )
            for s in segments
            if s.start < upto and (s.end is None or s.end > start)
        ]
        if not ranges:
            return []
        query = select(messages.c.data).where(or_(*ranges)).order_by(messages.c.idx)
        return await self._all(query, Message)

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        async with self.engine.connect() as conn:
            for s in reversed(segments):
                if s.start >= before:
                    continue
                end = before if s.end is None else min(s.end, before)
                found = await conn.scalar(
                    select(messages.c.idx)
                    .where(
                        messages.c.run_id == s.run_id,
                        messages.c.idx >= s.start,
                        messages.c.idx < end,
                        messages.c.role == role,
                    )
                    .order_by(messages.c.idx.desc())
                    .limit(1)
                )
                if found is not None:
                    return int(found)
        return None

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        ranges = []
        for s in segments:
            end = s.end if upto is None else (upto if s.end is None else min(s.end, upto))
            condition = and_(
                checkpoints.c.run_id == s.run_id, checkpoints.c.message_index > s.start
            )
            if end is not None:
                condition = and_(condition, checkpoints.c.message_index <= end)
            ranges.append(condition)
        if not ranges:
            return []
        query = select(checkpoints.c.data).where(or_(*ranges)).order_by(checkpoints.c.message_index)
        return await self._all(query, Checkpoint)

    # -- helpers ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """One write transaction (queued behind the others on SQLite)."""
        async with self._write_lock or contextlib.nullcontext(), self.engine.begin() as conn:
            yield conn

    def _insert(self, table: Table) -> Any:
        """The dialect's INSERT, which knows ON CONFLICT."""
        return (sqlite.insert if self.is_sqlite else postgresql.insert)(table)

    def _count(self, data: bytes) -> bytes:
        self.bytes_written += len(data)
        return data

    def _session_row(self, session: Session) -> dict[str, Any]:
        return {
            "session_id": session.session_id,
            "agent_id": session.agent_id,
            "forked_from_session_id": session.forked_from_session_id,
            "created_at": session.created_at,
            "data": self._count(_encode(session)),
        }

    def _run_row(self, run: Run) -> dict[str, Any]:
        return {
            "run_id": run.run_id,
            "session_id": run.session_id,
            "status": run.status.value,
            "data": self._count(_encode(run)),
            "state": self._count(_encode(_state(run))),
        }

    async def _runs(self, query: Any) -> list[Run]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            msgspec.structs.replace(
                _decode_run(data), **msgspec.structs.asdict(_decode_state(state))
            )
            for data, state in rows
        ]

    async def _one(self, query: Any, kind: type[T]) -> T | None:
        async with self.engine.connect() as conn:
            data = await conn.scalar(query)
        return None if data is None else msgspec.json.decode(data, type=kind)

    async def _all(self, query: Any, kind: type[T]) -> list[T]:
        async with self.engine.connect() as conn:
            rows = (await conn.scalars(query)).all()
        decoder = msgspec.json.Decoder(kind)
        return [decoder.decode(data) for data in rows]

    async def stored_bytes(self) -> int:
        """The document bytes the database holds now, for benchmarks."""
        total = 0
        async with self.engine.connect() as conn:
            for column in (
                sessions.c.data,
                runs.c.data,
                runs.c.state,
                messages.c.data,
                checkpoints.c.data,
            ):
                total += await conn.scalar(select(func.sum(func.length(column)))) or 0
        return total


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    for pragma in _SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()
