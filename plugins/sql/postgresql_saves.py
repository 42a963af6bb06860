"""PostgreSQL's grouped boundary (`PostgreSQL.save`): the boundaries of different runs that
came together (a group commit), written in one statement, each only while its run has the
writer's revision and answered for its own run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    CTE,
    BigInteger,
    Float,
    Insert,
    Integer,
    Select,
    String,
    Text,
    any_,
    bindparam,
    cast,
    func,
    insert,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA

from runpoint.core.types import now
from runpoint.plugins.sql.database import Save
from runpoint.plugins.sql.postgresql_appends import current, insert_events
from runpoint.plugins.sql.schema import (
    checkpoints,
    messages,
    runs,
    sessions,
    tool_calls,
)


def parameters(group: Sequence[Save]) -> tuple[Parts, dict[str, Any]]:
    """The parameters of the statement of a group of boundaries, and which rows it writes
    besides the runs'."""
    values: dict[str, Any] = {"started_at": now()}
    for name in _BOUNDARY_COLUMNS + _ROW_COLUMNS:
        values[name] = []
    for n, written in enumerate(group, 1):
        run, rows, mark = written.run, written.messages, written.checkpoint
        columns = (
            run.run_id,
            run.revision,
            run.session_id,
            sum(n for *_, n in rows) + 1,  # a place each message takes, and the boundary
            run.status.value,
            written.state,
            run.lease_owner,
            run.lease_expires_at,
            run.recoveries,
        )
        for name, value in zip(_BOUNDARY_COLUMNS, columns, strict=True):
            values[name].append(value)
        # each row's place (its first message's) counted back from its boundary's, the last
        before = sum(held for *_, held in rows)
        for index, role, data, held in rows:
            _append(values, message_saves=n, message_indexes=index, roles=role)
            _append(values, documents=data, message_places_before=before, counts=held)
            before -= held
        if mark is not None:
            _append(values, checkpoint_saves=n, checkpoint_indexes=mark[0])
            _append(values, checkpoint_documents=mark[1])
        for intent in written.intents:
            _append(values, intent_saves=n, intents=intent)
        for seq, data in written.events:
            _append(values, event_saves=n, event_seqs=seq, event_documents=data)
    return Parts(*(bool(values[rows[0]]) for rows in _PARTS_ROWS)), values


# the parameters of a grouped boundary statement: one array per column of the boundaries
# (the run's row and the places it takes), one per column of each kind of row they write
_BOUNDARY_COLUMNS = (
    "run_ids",
    "revisions",
    "session_ids",
    "places",
    "statuses",
    "states",
    "lease_owners",
    "lease_expires_ats",
    "recoveries",
)
_PARTS_ROWS = (
    ("message_saves", "message_indexes", "roles", "documents", "message_places_before", "counts"),
    ("checkpoint_saves", "checkpoint_indexes", "checkpoint_documents"),
    ("intent_saves", "intents"),
    ("event_saves", "event_seqs", "event_documents"),
)
_ROW_COLUMNS = tuple(name for rows in _PARTS_ROWS for name in rows)


def _append(values: dict[str, list[Any]], **row: Any) -> None:
    for name, value in row.items():
        values[name].append(value)


class Parts(NamedTuple):
    """Which rows a group of boundaries writes besides the runs': its statement has only
    their INSERTs (an empty one still costs the server its tables' locks, plan nodes and
    indexes)."""

    messages: bool
    checkpoints: bool
    intents: bool
    events: bool  # never before 0013 (no run_events): the run's input is written without


def _rows(name: str, *columns: tuple[str, Any]) -> Any:
    """The rows of a kind a group's boundaries write, from one array parameter per column
    (named as given), each with `n`, the place of its boundary in the group (from 1)."""
    arrays = [bindparam(f"{name}_saves", type_=ARRAY(BigInteger))]
    arrays += [bindparam(parameter, type_=ARRAY(kind)) for parameter, kind in columns]
    names = ["n"] + [parameter for parameter, _ in columns]
    return func.unnest(*arrays).table_valued(*names).render_derived(name)


def statement(parts: Parts) -> Select[tuple[int, bool]]:
    """The statement of `PostgreSQL.save`: each boundary's places in its session's log
    are taken only if its run's revision matches, its run's row written only then, and its
    rows only with its run's; what each boundary has, numbered by its place in the group
    (`n`, from 1). The sessions' rows are locked first, then the runs', each in the order
    of their ids (as `append_events` locks the runs): grouped writers wait for each other
    in the same order, so they cannot deadlock."""
    given = func.unnest(
        bindparam("run_ids", type_=ARRAY(String)),
        bindparam("revisions", type_=ARRAY(Integer)),
        bindparam("session_ids", type_=ARRAY(Text)),
        bindparam("places", type_=ARRAY(BigInteger)),
        bindparam("statuses", type_=ARRAY(String)),
        bindparam("states", type_=ARRAY(BYTEA)),
        bindparam("lease_owners", type_=ARRAY(String)),
        bindparam("lease_expires_ats", type_=ARRAY(Float)),
        bindparam("recoveries", type_=ARRAY(Integer)),
    ).table_valued(
        "run_id",
        "revision",
        "session_id",
        "places",
        "status",
        "state",
        "lease_owner",
        "lease_expires_at",
        "recoveries",
        with_ordinality="n",
    )
    # read in the order of their runs' ids (see `writers`)
    derived = given.render_derived("b")
    boundaries = select(derived).order_by(derived.c.run_id).cte("boundaries")
    b = boundaries.c
    # of the boundaries whose run has their revision as the statement starts, the places
    # each session's later ones take after it (a run changed meanwhile leaves its unused)
    moving = (
        select(
            b.n,
            b.session_id,
            b.places,
            (
                func.sum(b.places).over(partition_by=b.session_id)
                - func.sum(b.places).over(partition_by=b.session_id, order_by=b.n)
            ).label("after"),
        )
        .join_from(boundaries, current(b.run_id, b.revision), true())
        .cte("moving")
    )
    taken = (
        select(moving.c.session_id, func.sum(moving.c.places).label("places"))
        .group_by(moving.c.session_id)
        .subquery("taken")
    )
    cursors = (
        select(sessions.c.session_id, taken.c.places)
        .join_from(taken, sessions, sessions.c.session_id == taken.c.session_id)
        .order_by(sessions.c.session_id)
        .with_for_update(of=sessions, key_share=True)
        .cte("cursors")
    )
    log = (
        update(sessions)
        .where(sessions.c.session_id == cursors.c.session_id)
        .values(event_seq=sessions.c.event_seq + cursors.c.places)
        .returning(sessions.c.session_id, sessions.c.event_seq)
        .cte("log")
    )
    # every session's row is locked (its log's whole result is read once, first) before
    # any run's
    logged = select(func.array_agg(log.c.session_id)).scalar_subquery()
    locked = current(b.run_id, b.revision, "NO KEY UPDATE")
    writers = (
        select(b.n, locked.c.run_id)
        .join_from(boundaries, locked, true())
        .where(b.session_id == any_(cast(logged, ARRAY(Text))))
        .cte("writers")
    )
    run = (
        update(runs)
        .where(runs.c.run_id == writers.c.run_id, writers.c.n == b.n)
        .values(
            status=b.status,
            revision=runs.c.revision + 1,
            state=b.state,
            lease_owner=b.lease_owner,
            lease_expires_at=b.lease_expires_at,
            recoveries=b.recoveries,
        )
        .returning(b.n, runs.c.run_id, runs.c.cancel_requested)
        .cte("run")
    )
    # each written boundary's place: the last of those it takes
    written = (
        select(run.c.n, run.c.run_id, (log.c.event_seq - moving.c.after).label("place"))
        .join_from(run, moving, moving.c.n == run.c.n)
        .join(log, log.c.session_id == moving.c.session_id)
        .cte("written")
    )
    writes: list[Any] = []
    if parts.messages:
        writes.append(_new_messages(written).cte("new_messages"))
    if parts.checkpoints:
        writes.append(_new_checkpoints(written).cte("new_checkpoints"))
    if parts.intents:
        writes.append(_intents(written).cte("intents"))
    if parts.events:
        writes.append(_new_events(written).cte("new_events"))
    return select(run.c.n, run.c.cancel_requested).add_cte(*writes)


def _new_messages(written: CTE) -> Insert:
    """The messages of the written boundaries, in the places they took."""
    new = _rows(
        "message",
        ("message_indexes", Integer),
        ("roles", Text),
        ("documents", BYTEA),
        ("message_places_before", BigInteger),
        ("counts", Integer),
    )
    return insert(messages).from_select(
        ["run_id", "idx", "role", "data", "event_seq", "n"],
        select(
            written.c.run_id,
            new.c.message_indexes,
            new.c.roles,
            new.c.documents,
            written.c.place - new.c.message_places_before,
            new.c.counts,
        ).join_from(new, written, new.c.n == written.c.n),
    )


def _new_checkpoints(written: CTE) -> Insert:
    """The checkpoints of the written boundaries, in their boundary's place; the first at
    an index stands."""
    new = _rows("checkpoint", ("checkpoint_indexes", Integer), ("checkpoint_documents", BYTEA))
    return (
        postgresql.insert(checkpoints)
        .from_select(
            ["run_id", "message_index", "data", "event_seq"],
            select(
                written.c.run_id,
                new.c.checkpoint_indexes,
                new.c.checkpoint_documents,
                written.c.place,
            ).join_from(new, written, new.c.n == written.c.n),
        )
        .on_conflict_do_nothing()
    )


def _intents(written: CTE) -> Insert:
    """The side-effecting calls of the written boundaries, started at `started_at`."""
    new = _rows("intent", ("intents", Text))
    return insert(tool_calls).from_select(
        ["run_id", "tool_call_id", "started_at"],
        select(written.c.run_id, new.c.intents, bindparam("started_at", type_=Float)).join_from(
            new, written, new.c.n == written.c.n
        ),
    )


def _new_events(written: CTE) -> Insert:
    """The event rows of the written boundaries; a seq stored already stands."""
    new = _rows("event", ("event_seqs", Integer), ("event_documents", BYTEA))
    return insert_events(
        select(written.c.run_id, new.c.event_seqs, new.c.event_documents).join_from(
            new, written, new.c.n == written.c.n
        )
    )
