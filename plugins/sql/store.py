"""`Storage` on SQLAlchemy Core with an async engine: SQLite (aiosqlite) or PostgreSQL
(asyncpg)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from typing import Any, Generic, TypeVar

import msgspec
from sqlalchemy import delete, event, false, insert, select, text, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from runpoint.errors import Conflict, Locked
from runpoint.plugins.sql import migrate
from runpoint.plugins.sql.schema import (
    checkpoints,
    idempotency_keys,
    messages,
    runs,
    session_checkpoints,
    sessions,
    tool_calls,
)
from runpoint.types import (
    Checkpoint,
    Decision,
    Message,
    Role,
    Rollback,
    Run,
    RunStatus,
    Segment,
    Session,
    SessionCapture,
    SessionCheckpoint,
    SessionCheckpointStatus,
    Usage,
    now,
)

T = TypeVar("T")
_encode = msgspec.json.Encoder().encode
_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",  # durable at each commit in WAL mode, short of power loss
    "PRAGMA busy_timeout=10000",
)
IN_FLIGHT = (RunStatus.PENDING.value, RunStatus.RUNNING.value)
# A boundary takes the next places of its session's event log: one per message, then one
# for itself (its status change, and its checkpoint if any). The log's cursor is taken first
# (the session's row, then the run's: the lock order of every session writer); messages, the
# checkpoint and the intents of tool calls are written only if the run's row was (its
# revision matched), and no row back means it was not (the cursor then skips a few places:
# it only has to grow).
_SAVE_POSTGRESQL = """
WITH log AS (
    UPDATE sessions SET event_seq = event_seq + $13
    WHERE session_id = $14
      AND EXISTS (SELECT 1 FROM runs WHERE run_id = $1 AND revision = $2)
    RETURNING event_seq
), run AS (
    UPDATE runs SET status = $3, revision = revision + 1, state = $4::jsonb,
        lease_owner = $10, lease_expires_at = $11, recoveries = $12
    WHERE run_id = $1 AND revision = $2 AND EXISTS (SELECT 1 FROM log)
    RETURNING run_id, cancel_requested
), new_messages AS (
    INSERT INTO messages (run_id, idx, role, data, event_seq)
    SELECT run.run_id, m.idx, m.role, m.data::jsonb, log.event_seq - $13 + m.n
    FROM run, log, unnest($5::int[], $6::text[], $7::text[]) WITH ORDINALITY
        AS m(idx, role, data, n)
), new_checkpoint AS (
    INSERT INTO checkpoints (run_id, message_index, data, event_seq)
    SELECT run.run_id, c.idx, c.data::jsonb, log.event_seq
    FROM run, log, unnest($8::int[], $9::text[]) AS c(idx, data)
    ON CONFLICT (run_id, message_index) DO UPDATE
    SET data = excluded.data, event_seq = excluded.event_seq
), intents AS (
    INSERT INTO tool_calls (run_id, tool_call_id, started_at)
    SELECT run.run_id, t.id, $16::float8 FROM run, unnest($15::text[]) AS t(id)
)
SELECT cancel_requested FROM run
"""
_NO_END = 2**31 - 1  # an open segment's end: the largest INTEGER both backends store


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
    in_doubt: list[str] = []
    decisions: dict[str, Decision] = {}


_STATE_FIELDS = _RunState.__struct_fields__


def _state(run: Run) -> _RunState:
    return _RunState(**{f: getattr(run, f) for f in _STATE_FIELDS})


_RUN_COLUMNS = (
    "data, state, revision, lease_owner, lease_expires_at, recoveries, cancel_requested, hidden"
)
# PostgreSQL's JSONB holds no U+0000, whose JSON escape is this
_NUL = b"\\u0000"


def _storable(document: bytes) -> bytes:
    """A document as both databases hold it: one with a NUL is kept as a JSON array of one
    string, its own JSON text, in which the escape is mere text. (The text `\\u0000`, a
    backslash before u0000, is found too: its document is wrapped, needlessly but whole.)"""
    return _encode((document.decode(),)) if _NUL in document else document


class _Decoder(Generic[T]):
    """Decodes stored documents of `kind`, wrapped by `_storable` or not."""

    def __init__(self, kind: type[T]) -> None:
        self._plain = msgspec.json.Decoder(kind).decode
        self._stored = msgspec.json.Decoder(kind | tuple[str]).decode

    def __call__(self, data: bytes | str) -> T:
        document = self._stored(data)
        return self._plain(document[0]) if isinstance(document, tuple) else document

    def all(self, documents: Sequence[bytes | str]) -> list[T]:
        """Many documents, as fast as plain ones while none of them is wrapped (a run's
        transcript: a Python call per message would cost a tenth more)."""
        try:
            return [self._plain(data) for data in documents]
        except msgspec.ValidationError:
            return [self(data) for data in documents]


_decode_run = _Decoder(Run)
_decode_message = _Decoder(Message)
_decode_state = _Decoder(_RunState)
_decode_session = _Decoder(Session)
_decode_checkpoint = _Decoder(Checkpoint)
_decode_session_checkpoint = _Decoder(SessionCheckpoint)
_decode_capture = _Decoder(SessionCapture)
_decode_answer = _Decoder(str)


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
        # single statements need no transaction: no BEGIN and COMMIT round trips
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        if self.is_sqlite:
            event.listen(self.engine.sync_engine, "connect", _sqlite_connect)
        # SQLite has one writer: queue this process's writers instead of waiting in SQLite.
        self._write_lock = asyncio.Lock() if self.is_sqlite else None
        self.bytes_written = 0  # document bytes handed to the database, for benchmarks
        self._reader: sqlite3.Connection | None = None  # SQLite's inline read connection

    async def open(self) -> None:
        await migrate.upgrade(self.engine)
        if self.is_sqlite and self.url.database not in (None, "", ":memory:"):
            self._reader = sqlite3.connect(
                self.url.database, check_same_thread=False, isolation_level=None
            )
            _sqlite_connect(self._reader, None)
            self._reader.execute("PRAGMA query_only=ON")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        await self.engine.dispose()

    # -- sessions ------------------------------------------------------------------

    async def create_sessions(
        self,
        sessions_: Sequence[Session],
        runs_: Sequence[Run] = (),
        incoming: Mapping[str, Sequence[Message]] = {},
    ) -> None:
        async with self._write() as conn:
            try:
                await conn.execute(insert(sessions), [self._session_row(s) for s in sessions_])
            except IntegrityError:
                taken = ", ".join(s.session_id for s in sessions_)
                raise Conflict(f"session {taken} already exists") from None
            if runs_:
                await self._insert_runs(conn, runs_, incoming)

    async def get_session(self, session_id: str) -> Session | None:
        found = await self._sessions("WHERE session_id = :id", {"id": session_id})
        return found[0] if found else None

    async def list_sessions(self, *, team_id: str, limit: int, offset: int) -> list[Session]:
        return await self._sessions(
            "WHERE team_id = :team "
            "ORDER BY created_at DESC, session_id LIMIT :limit OFFSET :offset",
            {"team": team_id, "limit": limit, "offset": offset},
        )

    async def _sessions(self, where: str, params: dict[str, Any]) -> list[Session]:
        rows = await self._fetch(f"SELECT data, event_seq, locked FROM sessions {where}", params)
        return [
            msgspec.structs.replace(_decode_session(data), event_seq=seq, locked=locked)
            for data, seq, locked in rows
        ]

    async def lock_session(
        self, session_id: str, reason: str, rollback: Rollback | None = None
    ) -> bool:
        async with self._write() as conn:
            if not await self._lock_session(conn, session_id, refuse_locked=True):
                return False
            await self._refuse_in_flight(conn, session_id)
            await self._set_lock(conn, session_id, reason, rollback)
            return True

    async def unlock_session(self, session_id: str, rollback_owner: str | None = None) -> bool:
        async with self._write() as conn:
            if rollback_owner is None:
                found = await self._lock_session(conn, session_id)
            else:
                found = await self._rollback(conn, session_id, rollback_owner) is not None
            if found:
                await self._set_lock(conn, session_id, None, None)
            return found

    async def hold_rollback(self, session_id: str, rollback: Rollback) -> bool:
        async with self._write() as conn:
            held = await self._rollback(conn, session_id, rollback.lease.owner)
            if held is None or held.checkpoint_id != rollback.checkpoint_id:
                return False
            await self._set_lock(conn, session_id, "rollback", rollback)
            return True

    async def rollback_session(self, session_id: str, runs_: Sequence[Run], owner: str) -> bool:
        async with self._write() as conn:
            # the session's row first, as `save`
            if await self._rollback(conn, session_id, owner) is None:
                return False
            await conn.execute(
                update(runs)
                .where(runs.c.session_id == session_id, runs.c.hidden == false())
                .values(hidden=True)
            )
            if runs_:
                await conn.execute(insert(runs), [self._run_row(r) for r in runs_])
            # the rollback is an event of the session too
            await self._set_lock(conn, session_id, None, None, event_seq=sessions.c.event_seq + 1)
            return True

    # -- session checkpoints ---------------------------------------------------------

    async def add_session_checkpoint(self, checkpoint: SessionCheckpoint) -> None:
        async with self._write() as conn:
            await conn.execute(
                insert(session_checkpoints).values(
                    checkpoint_id=checkpoint.checkpoint_id,
                    session_id=checkpoint.session_id,
                    data=self._document(_encode(checkpoint)),
                )
            )

    async def update_session_checkpoint(
        self, checkpoint: SessionCheckpoint, capture: bytes | None, owner: str | None
    ) -> bool:
        row = session_checkpoints.c.checkpoint_id == checkpoint.checkpoint_id
        async with self._write() as conn:
            query = select(session_checkpoints.c.data).where(row)
            data = await conn.scalar(query if self.is_sqlite else query.with_for_update())
            stored = None if data is None else _decode_session_checkpoint(data)
            if stored is None or stored.status is not SessionCheckpointStatus.PENDING:
                return False
            if stored.lease is not None and not stored.lease.open_to(owner):
                return False
            await conn.execute(
                update(session_checkpoints)
                .where(row)
                .values(
                    data=self._document(_encode(checkpoint)),
                    capture=None if capture is None else self._document(capture),
                )
            )
            return True

    async def get_session_checkpoint(self, checkpoint_id: str) -> SessionCheckpoint | None:
        sql = "SELECT data FROM session_checkpoints WHERE checkpoint_id = :id"
        found = await self._documents(sql, {"id": checkpoint_id}, _decode_session_checkpoint)
        return found[0] if found else None

    async def session_capture(self, checkpoint_id: str) -> SessionCapture | None:
        sql = "SELECT capture FROM session_checkpoints WHERE checkpoint_id = :id"
        found = await self._fetch(sql, {"id": checkpoint_id})
        return _decode_capture(found[0][0]) if found and found[0][0] is not None else None

    async def list_session_checkpoints(
        self, session_id: str, *, limit: int, before: int | None
    ) -> list[tuple[int, SessionCheckpoint]]:
        sql = (
            "SELECT seq, data FROM session_checkpoints WHERE session_id = :id AND seq < :before "
            "ORDER BY seq DESC LIMIT :limit"
        )
        # a client's token may be any integer: one beyond the column's range means that end
        before = _NO_END if before is None else max(0, min(before, _NO_END))
        params = {"id": session_id, "before": before}
        rows = await self._fetch(sql, params | {"limit": limit})
        return [(seq, _decode_session_checkpoint(data)) for seq, data in rows]

    async def delete_session_checkpoint(self, checkpoint_id: str) -> None:
        async with self._write() as conn:
            await conn.execute(
                delete(session_checkpoints).where(
                    session_checkpoints.c.checkpoint_id == checkpoint_id
                )
            )

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
            await self._refuse_in_flight(conn, session_id)
            run_ids = select(runs.c.run_id).where(runs.c.session_id == session_id)
            await conn.execute(delete(messages).where(messages.c.run_id.in_(run_ids)))
            await conn.execute(delete(checkpoints).where(checkpoints.c.run_id.in_(run_ids)))
            await conn.execute(
                delete(session_checkpoints).where(session_checkpoints.c.session_id == session_id)
            )
            await conn.execute(delete(runs).where(runs.c.session_id == session_id))
            result = await conn.execute(delete(sessions).where(sessions.c.session_id == session_id))
            return bool(result.rowcount)

    # -- runs ------------------------------------------------------------------------

    async def create_runs(
        self, runs_: Sequence[Run], incoming: Mapping[str, Sequence[Message]] = {}
    ) -> None:
        async with self._write() as conn:
            for session_id in {r.session_id for r in runs_}:
                await self._lock_session(conn, session_id, refuse_locked=True)
            await self._insert_runs(conn, runs_, incoming)

    async def start_in_session(self, run: Run, incoming: Sequence[Message] = ()) -> Run:
        async with self._write() as conn:
            await self._lock_session(conn, run.session_id, refuse_locked=True)
            await self._refuse_in_flight(conn, run.session_id)
            newest = await conn.scalar(
                select(runs.c.run_id)
                .where(runs.c.session_id == run.session_id, runs.c.hidden == false())
                .order_by(runs.c.seq.desc())
                .limit(1)
            )
            run = msgspec.structs.replace(run, previous_run_id=newest)
            await self._insert_runs(conn, [run], {run.run_id: incoming})
        return run

    async def _insert_runs(
        self,
        conn: AsyncConnection,
        runs_: Sequence[Run],
        incoming: Mapping[str, Sequence[Message]],
    ) -> None:
        """Insert runs; a run's incoming messages are then saved in the same transaction,
        exactly as `save` writes a boundary."""
        await conn.execute(insert(runs), [self._run_row(r) for r in runs_])
        for run in runs_:
            if messages_ := incoming.get(run.run_id):
                await self._save(conn, run, messages_, None)

    async def get_run(self, run_id: str) -> Run | None:
        found = await self._runs("WHERE run_id = :id", {"id": run_id})
        return found[0] if found else None

    async def list_runs(self, session_id: str) -> list[Run]:
        return await self._runs(
            "WHERE session_id = :id AND NOT hidden ORDER BY seq", {"id": session_id}
        )

    async def save(
        self,
        run: Run,
        messages_: Sequence[Message],
        checkpoint: Checkpoint | None,
        *,
        intents: Sequence[str] = (),
    ) -> None:
        # on PostgreSQL a boundary is one statement: atomic without a transaction of its own
        connection = self._write() if self.is_sqlite else self._autocommit.connect()
        async with connection as conn:
            await self._save(conn, run, messages_, checkpoint, intents)

    async def _save(
        self,
        conn: AsyncConnection,
        run: Run,
        messages_: Sequence[Message],
        checkpoint: Checkpoint | None,
        intents: Sequence[str] = (),
    ) -> None:
        """`save` on a connection: in its own transaction, or in a caller's."""
        first = run.message_count - len(messages_)
        state = self._document(_encode(_state(run)))
        rows = [(first + i, m.role, self._document(_encode(m))) for i, m in enumerate(messages_)]
        mark = None
        if checkpoint is not None:
            mark = (checkpoint.message_index, self._document(_encode(checkpoint)))
        write = self._save_sqlite if self.is_sqlite else self._save_postgresql
        cancel_requested = await write(conn, run, state, rows, mark, intents)
        if cancel_requested is None:
            raise Conflict(f"run {run.run_id} was changed by another writer")
        run.revision += 1
        run.cancel_requested = cancel_requested

    async def _save_sqlite(
        self,
        conn: AsyncConnection,
        run: Run,
        state: bytes,
        rows: Sequence[tuple[int, str, bytes]],
        mark: tuple[int, bytes] | None,
        intents: Sequence[str],
    ) -> bool | None:
        cancel_requested = await conn.scalar(
            update(runs)
            .where(runs.c.run_id == run.run_id, runs.c.revision == run.revision)
            .values(
                status=run.status.value,
                revision=run.revision + 1,
                state=state,
                lease_owner=run.lease_owner,
                lease_expires_at=run.lease_expires_at,
                recoveries=run.recoveries,
            )
            .returning(runs.c.cancel_requested)
        )
        if cancel_requested is None:
            return None
        # see _SAVE_POSTGRESQL: a place in the session's log per message, then the boundary
        cursor = await conn.scalar(
            update(sessions)
            .where(sessions.c.session_id == run.session_id)
            .values(event_seq=sessions.c.event_seq + len(rows) + 1)
            .returning(sessions.c.event_seq)
        )
        first = cursor - len(rows)
        if rows:
            await conn.execute(
                insert(messages),
                [
                    {
                        "run_id": run.run_id,
                        "idx": i,
                        "role": r,
                        "data": d,
                        "event_seq": first + n,
                    }
                    for n, (i, r, d) in enumerate(rows)
                ],
            )
        if mark is not None:
            upsert = sqlite.insert(checkpoints).values(
                run_id=run.run_id, message_index=mark[0], data=mark[1], event_seq=cursor
            )
            await conn.execute(
                upsert.on_conflict_do_update(
                    index_elements=["run_id", "message_index"],
                    set_={"data": upsert.excluded.data, "event_seq": upsert.excluded.event_seq},
                )
            )
        if intents:
            started = now()
            await conn.execute(
                insert(tool_calls),
                [{"run_id": run.run_id, "tool_call_id": i, "started_at": started} for i in intents],
            )
        return bool(cancel_requested)

    async def _save_postgresql(
        self,
        conn: AsyncConnection,
        run: Run,
        state: bytes,
        rows: Sequence[tuple[int, str, bytes]],
        mark: tuple[int, bytes] | None,
        intents: Sequence[str],
    ) -> bool | None:
        """The whole boundary in one statement: one round trip, atomic without BEGIN."""
        params = (
            run.run_id,
            run.revision,
            run.status.value,
            state.decode(),
            [i for i, _, _ in rows],
            [r for _, r, _ in rows],
            [d.decode() for _, _, d in rows],
            [mark[0]] if mark else [],
            [mark[1].decode()] if mark else [],
            run.lease_owner,
            run.lease_expires_at,
            run.recoveries,
            len(rows) + 1,
            run.session_id,
            list(intents),
            now(),
        )
        saved = await conn.exec_driver_sql(_SAVE_POSTGRESQL, params)
        cancel_requested: bool | None = saved.scalar()
        return cancel_requested

    # -- transcripts -----------------------------------------------------------------

    async def read_messages(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[Message]:
        ranges = [
            (s.run_id, max(s.start, start), _end(s, upto))
            for s in segments
            if s.start < upto and _end(s, None) > start
        ]
        if not ranges:
            return []
        where, params = _ranges("idx >= :lo{i} AND idx < :hi{i}", ranges)
        sql = f"SELECT data FROM messages WHERE {where} ORDER BY idx"
        return await self._documents(sql, params, _decode_message)

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        sql = (
            "SELECT idx FROM messages WHERE run_id = :run AND idx >= :lo AND idx < :hi "
            "AND role = :role ORDER BY idx DESC LIMIT 1"
        )
        for s in reversed(segments):
            if s.start >= before:
                continue
            end = before if s.end is None else min(s.end, before)
            params = {"run": s.run_id, "lo": s.start, "hi": end, "role": role}
            if found := await self._fetch(sql, params):
                return int(found[0][0])
        return None

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        # a segment's checkpoints lie in (start, end]: the one at a fork point is its source's
        ranges = [(s.run_id, s.start, _end(s, upto)) for s in segments]
        if not ranges:
            return []
        where, params = _ranges("message_index > :lo{i} AND message_index <= :hi{i}", ranges)
        sql = f"SELECT data, event_seq FROM checkpoints WHERE {where} ORDER BY message_index"
        return [
            msgspec.structs.replace(_decode_checkpoint(data), event_seq=seq)
            for data, seq in await self._fetch(sql, params)
        ]

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

    async def _lock_session(
        self, conn: AsyncConnection, session_id: str, *, refuse_locked: bool = False
    ) -> bool:
        """Serialise the writers of a session's runs until commit, so runs commit in the
        order of their `seq` (SQLite's BEGIN IMMEDIATE already serialises every writer).
        False if there is no such session; with `refuse_locked`, Locked if it is locked."""
        query = select(sessions.c.locked).where(sessions.c.session_id == session_id)
        found = (await conn.execute(query if self.is_sqlite else query.with_for_update())).first()
        if found is not None and found.locked is not None and refuse_locked:
            raise Locked.session(found.locked)
        return found is not None

    async def _rollback(
        self, conn: AsyncConnection, session_id: str, owner: str
    ) -> Rollback | None:
        """The session's rollback under way if its lease is `owner`'s or ran out, its row
        locked until commit (as `_lock_session`)."""
        query = select(sessions.c.locked, sessions.c.data).where(
            sessions.c.session_id == session_id
        )
        found = (await conn.execute(query if self.is_sqlite else query.with_for_update())).first()
        if found is None or found.locked != "rollback":
            return None
        rollback = _decode_session(found.data).rollback
        return rollback if rollback is not None and rollback.lease.open_to(owner) else None

    async def _set_lock(
        self,
        conn: AsyncConnection,
        session_id: str,
        locked: str | None,
        rollback: Rollback | None,
        **values: Any,
    ) -> None:
        """Lock the session (`locked`: why) or unlock it (None), with the rollback under way
        if that is why; the caller locked its row."""
        where = sessions.c.session_id == session_id
        session = _decode_session(
            (await conn.execute(select(sessions.c.data).where(where))).scalar_one()
        )
        data = self._document(_encode(msgspec.structs.replace(session, rollback=rollback)))
        await conn.execute(update(sessions).where(where).values(locked=locked, data=data, **values))

    async def _refuse_in_flight(self, conn: AsyncConnection, session_id: str) -> None:
        busy = await conn.scalar(
            select(runs.c.run_id)
            .where(runs.c.session_id == session_id, runs.c.status.in_(IN_FLIGHT))
            .limit(1)
        )
        if busy is not None:
            raise Conflict(
                f"run {busy} of session {session_id} is in flight; "
                "wait for it to finish, or cancel it"
            )

    def _document(self, encoded: bytes) -> bytes:
        """Every document on its way to the database: storable, and counted."""
        document = _storable(encoded)
        self.bytes_written += len(document)
        return document

    def _session_row(self, session: Session) -> dict[str, Any]:
        return {
            "session_id": session.session_id,
            "agent_id": session.agent_id,
            "team_id": session.team_id,
            "forked_from_session_id": session.forked_from_session_id,
            "created_at": session.created_at,
            "event_seq": session.event_seq,
            # the cursor and the lock live in their columns only: no stale copy in the document
            "data": self._document(
                _encode(msgspec.structs.replace(session, event_seq=0, locked=None))
            ),
        }

    def _run_row(self, run: Run) -> dict[str, Any]:
        return {
            "run_id": run.run_id,
            "session_id": run.session_id,
            "status": run.status.value,
            "revision": run.revision,
            "lease_owner": run.lease_owner,
            "lease_expires_at": run.lease_expires_at,
            "data": self._document(_encode(run)),
            "state": self._document(_encode(_state(run))),
        }

    async def _runs(self, where: str, params: dict[str, Any]) -> list[Run]:
        rows = await self._fetch(f"SELECT {_RUN_COLUMNS} FROM runs {where}", params)
        return [
            msgspec.structs.replace(
                _decode_run(data),
                **msgspec.structs.asdict(_decode_state(state)),
                revision=revision,
                lease_owner=owner,
                lease_expires_at=expires,
                recoveries=recoveries,
                cancel_requested=bool(cancel),  # SQLite says 0 or 1
                hidden=bool(hidden),
            )
            for data, state, revision, owner, expires, recoveries, cancel, hidden in rows
        ]

    async def record_tool_result(self, run_id: str, result: Message) -> None:
        async with self._write() as conn:
            await conn.execute(
                update(tool_calls)
                .where(
                    tool_calls.c.run_id == run_id, tool_calls.c.tool_call_id == result.tool_call_id
                )
                .values(result=self._document(_encode(result)))
            )

    async def tool_records(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> dict[str, Message | None]:
        if not tool_call_ids:
            return {}
        names = {f"c{i}": call_id for i, call_id in enumerate(tool_call_ids)}
        sql = (
            "SELECT tool_call_id, result FROM tool_calls WHERE run_id = :run "
            f"AND tool_call_id IN ({', '.join(':' + n for n in names)})"
        )
        rows = await self._fetch(sql, {"run": run_id, **names})
        return {i: None if r is None else _decode_message(r) for i, r in rows}

    async def claim_key(
        self, scope: str, key: str, fingerprint: str
    ) -> tuple[str, str | None] | None:
        row = {"scope": scope, "key": key, "fingerprint": fingerprint, "created_at": now()}
        insert_ = (sqlite.insert if self.is_sqlite else postgresql.insert)(idempotency_keys)
        async with self._write() as conn:
            claimed = await conn.execute(insert_.values(row).on_conflict_do_nothing())
            if claimed.rowcount == 1:
                return None
            standing = (
                await conn.execute(
                    select(idempotency_keys.c.fingerprint, idempotency_keys.c.response).where(
                        idempotency_keys.c.scope == scope, idempotency_keys.c.key == key
                    )
                )
            ).one()
        answer = standing.response
        return standing.fingerprint, None if answer is None else _decode_answer(answer)

    async def answer_key(self, scope: str, key: str, answer: str) -> None:
        async with self._write() as conn:
            await conn.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.scope == scope, idempotency_keys.c.key == key)
                .values(response=self._document(_encode(answer)))
            )

    async def release_key(self, scope: str, key: str) -> None:
        async with self._write() as conn:
            await conn.execute(
                delete(idempotency_keys).where(
                    idempotency_keys.c.scope == scope, idempotency_keys.c.key == key
                )
            )

    async def request_cancel(self, run_id: str) -> bool:
        async with self._write() as conn:
            flagged = await conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id, runs.c.status.in_(IN_FLIGHT))
                .values(cancel_requested=True)
            )
            return bool(flagged.rowcount)

    async def renew_leases(self, owner: str, run_ids: Collection[str], until: float) -> None:
        async with self._write() as conn:
            await conn.execute(
                update(runs)
                .where(
                    runs.c.lease_owner == owner,
                    runs.c.run_id.in_(list(run_ids)),
                    runs.c.status.in_(IN_FLIGHT),
                )
                .values(lease_expires_at=until)
            )

    async def expired_runs(self, before: float, agent_ids: Collection[str]) -> list[Run]:
        expired = await self._runs(
            "WHERE status IN (:pending, :running)"
            " AND (lease_expires_at IS NULL OR lease_expires_at < :t)"
            " ORDER BY lease_expires_at LIMIT 20",
            {"pending": IN_FLIGHT[0], "running": IN_FLIGHT[1], "t": before},
        )
        return [r for r in expired if r.agent_id in agent_ids]

    async def _documents(self, sql: str, params: dict[str, Any], decoder: _Decoder[T]) -> list[T]:
        return decoder.all([data for (data,) in await self._fetch(sql, params)])

    async def _fetch(self, sql: str, params: dict[str, Any]) -> Sequence[Any]:
        """Rows of a read. SQLite reads run inline: an indexed read takes microseconds,
        far less than handing it to a thread and back (see DESIGN.md's measurements)."""
        if self._reader is not None:
            return self._reader.execute(sql, params).fetchall()
        async with self._autocommit.connect() as conn:
            return (await conn.execute(text(sql), params)).all()

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


def _end(segment: Segment, upto: int | None) -> int:
    """Where a segment ends, cut at `upto`."""
    return min((e for e in (segment.end, upto) if e is not None), default=_NO_END)


def _ranges(condition: str, ranges: list[tuple[str, int, int]]) -> tuple[str, dict[str, Any]]:
    """`(run_id = :run0 AND <condition 0>) OR ...` and its parameters, one per range."""
    where = " OR ".join(
        f"(run_id = :run{i} AND {condition.format(i=i)})" for i in range(len(ranges))
    )
    params: dict[str, Any] = {}
    for i, (run_id, lo, hi) in enumerate(ranges):
        params |= {f"run{i}": run_id, f"lo{i}": lo, f"hi{i}": hi}
    return where, params


def _sqlite_connect(dbapi_connection: Any, _record: Any) -> None:
    # Transactions are begun by hand (see `_write`); reads need none.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in _SQLITE_PRAGMAS:
        cursor.execute(pragma)
    cursor.close()
