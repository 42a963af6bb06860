"""`Storage` on SQLAlchemy Core with an async engine: SQLite (aiosqlite) or PostgreSQL
(asyncpg)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

import msgspec
from sqlalchemy import Table, and_, delete, event, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from runpoint.errors import Conflict
from runpoint.plugins.sql import migrate
from runpoint.plugins.sql.schema import checkpoints, messages, runs, sessions
from runpoint.types import Checkpoint, Message, Role, Run, RunStatus, Segment, Session, Usage

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",  # durable at each commit in WAL mode, short of power loss
    "PRAGMA busy_timeout=10000",
)
IN_FLIGHT = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


class _RunState(msgspec.Struct, omit_defaults=True):
    """The fields of a run that change while it goes (defaults as in `Run`)."""

    status: RunStatus = RunStatus.PENDING
    message_count: int = 0
    updated_at: float = 0.0
    usage: Usage = msgspec.field(default_factory=Usage)
    content: str | None = None
    error: str | None = None
    model: str | None = None
    last_checkpoint_at_message_index: int | None = None


_STATE_FIELDS = _RunState.__struct_fields__
_decode_run = msgspec.json.Decoder(Run).decode
_decode_state = msgspec.json.Decoder(_RunState).decode


def _identity(value: Any) -> Any:
    return value


class SqlStorage:
    def __init__(self, url: str, **engine_options: Any) -> None:
        parsed = make_url(url)
        if "+" not in parsed.drivername:
            parsed = parsed.set(drivername=_DRIVERS.get(parsed.drivername, parsed.drivername))
        self.url = parsed
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if not self.is_sqlite:
            # documents are already JSON: hand them to JSONB and back untouched
            engine_options = {"json_serializer": _identity, "json_deserializer": _identity} | (
                engine_options
            )
        self.engine = create_async_engine(parsed, **engine_options)
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_connect)
        # SQLite has one writer: queue this process's writers instead of waiting in SQLite.
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        self.bytes_written = 0  # document bytes handed to the database, for benchmarks

    async def open(self) -> None:
        await migrate.upgrade(self.engine)

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
        found = await self._all(query, Session)
        return found[0] if found else None

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
            await self._lock_session(conn, session_id)
            busy = await conn.scalar(
                select(runs.c.run_id)
                .where(runs.c.session_id == session_id, runs.c.status.in_(IN_FLIGHT))
                .limit(1)
            )
            if busy is not None:
                raise Conflict(f"run {busy} of session {session_id} is in flight; cancel it first")
            run_ids = select(runs.c.run_id).where(runs.c.session_id == session_id)
            await conn.execute(delete(messages).where(messages.c.run_id.in_(run_ids)))
            await conn.execute(delete(checkpoints).where(checkpoints.c.run_id.in_(run_ids)))
            await conn.execute(delete(runs).where(runs.c.session_id == session_id))
            result = await conn.execute(delete(sessions).where(sessions.c.session_id == session_id))
            return bool(result.rowcount)

    # -- runs ------------------------------------------------------------------------

    async def create_runs(self, runs_: Sequence[Run]) -> None:
        async with self._write() as conn:
            for session_id in {r.session_id for r in runs_}:
                await self._lock_session(conn, session_id)
            await conn.execute(insert(runs), [self._run_row(r) for r in runs_])

    async def start_in_session(self, run: Run) -> Run:
        async with self._write() as conn:
            await self._lock_session(conn, run.session_id)
            busy = await conn.scalar(
                select(runs.c.run_id)
                .where(runs.c.session_id == run.session_id, runs.c.status.in_(IN_FLIGHT))
                .limit(1)
            )
            if busy is not None:
                raise Conflict(
                    f"run {busy} of session {run.session_id} is in flight; "
                    "wait for it to finish, or cancel it"
                )
            newest = await conn.scalar(
                select(runs.c.run_id)
                .where(runs.c.session_id == run.session_id)
                .order_by(runs.c.seq.desc())
                .limit(1)
            )
            run = msgspec.structs.replace(run, previous_run_id=newest)
            await conn.execute(insert(runs), [self._run_row(run)])
        return run

    async def get_run(self, run_id: str) -> Run | None:
        found = await self._runs(_run_query().where(runs.c.run_id == run_id))
        return found[0] if found else None

    async def list_runs(self, session_id: str) -> list[Run]:
        return await self._runs(
            _run_query().where(runs.c.session_id == session_id).order_by(runs.c.seq)
        )

    async def save(
        self, run: Run, messages_: Sequence[Message], checkpoint: Checkpoint | None
    ) -> None:
        first = run.message_count - len(messages_)
        async with self._write() as conn:
            state = _RunState(**{f: getattr(run, f) for f in _STATE_FIELDS})
            updated = await conn.execute(
                update(runs)
                .where(runs.c.run_id == run.run_id, runs.c.revision == run.revision)
                .values(
                    status=run.status.value,
                    revision=run.revision + 1,
                    state=self._count(_encode(state)),
                )
            )
            if updated.rowcount != 1:
                raise Conflict(f"run {run.run_id} was changed by another writer")
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
                        index_elements=["run_id", "message_index"],
                        set_={"data": upsert.excluded.data},
                    )
                )
        run.revision += 1

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
        """One write transaction. On SQLite it takes the database's write lock at BEGIN,
        so a transaction that reads before it writes cannot be refused half-way."""
        if not self.is_sqlite:
            async with self.engine.begin() as conn:
                yield conn
            return
        assert self._write_lock is not None
        async with self._write_lock, self.engine.connect() as conn:
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                await conn.exec_driver_sql("ROLLBACK")
                raise
            await conn.exec_driver_sql("COMMIT")

    async def _lock_session(self, conn: AsyncConnection, session_id: str) -> None:
        """Serialise the writers of a session's runs until commit, so runs commit in the
        order of their `seq` (SQLite's BEGIN IMMEDIATE already serialises every writer)."""
        if not self.is_sqlite:
            await conn.execute(
                select(sessions.c.session_id)
                .where(sessions.c.session_id == session_id)
                .with_for_update()
            )

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
            "revision": run.revision,
            "data": self._count(_encode(run)),
            "state": self._count(_encode(_RunState(**{f: getattr(run, f) for f in _STATE_FIELDS}))),
        }

    async def _runs(self, query: Any) -> list[Run]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [
            msgspec.structs.replace(
                _decode_run(data),
                revision=revision,
                **msgspec.structs.asdict(_decode_state(state)),
            )
            for data, state, revision in rows
        ]

    async def _all(self, query: Any, kind: type[T]) -> list[T]:
        async with self.engine.connect() as conn:
            rows = (await conn.scalars(query)).all()
        decoder = msgspec.json.Decoder(kind)
        return [decoder.decode(data) for data in rows]

    async def stored_bytes(self) -> int:
        """The document bytes the database holds now, measured as written (compact JSON),
        for benchmarks."""
        total = 0
        async with self.engine.connect() as conn:
            for column in (
                sessions.c.data,
                runs.c.data,
                runs.c.state,
                messages.c.data,
                checkpoints.c.data,
            ):
                for data in await conn.scalars(select(column)):
                    total += len(_encode(msgspec.json.decode(data)))
        return total


def _run_query() -> Any:
    return select(runs.c.data, runs.c.state, runs.c.revision)


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Transactions are begun by hand (see `_write`); reads need none.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in _SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()
