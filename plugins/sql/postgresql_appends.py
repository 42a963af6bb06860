"""PostgreSQL's append of events to runs (`PostgreSQL.append_events`), each only while its
run has the writer's revision, and the two parts the grouped boundary
(`runpoint.plugins.sql.postgresql_saves`) shares with it: a run looked up (and locked)
under a revision, and the insert of event rows."""

from __future__ import annotations

from typing import Any, Literal

from sqlalchemy import (
    BigInteger,
    Insert,
    Integer,
    Select,
    String,
    bindparam,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA

from runpoint.plugins.sql.schema import run_events, runs

_Lock = Literal["SHARE", "NO KEY UPDATE"]


def current(run_id: Any, revision: Any, lock: _Lock | None = None) -> Any:
    """The id of the run of `run_id` if it has `revision` (none else), locked against
    other writers if `lock` says how (PostgreSQL's row lock of that name), in the order
    of the rows of the query it is joined to: looked up by its key for each of them. (The
    LIMIT keeps the planner from turning it into a join that it may plan as a scan of the
    table: a plan made while the table was small is kept for the connection, so it would
    scan the table at each call as it grows.)"""
    found = (
        select(runs.c.run_id)
        .where(runs.c.run_id == run_id, runs.c.revision == revision)
        .limit(literal_column("1"))
    )
    if lock is not None:
        found = found.with_for_update(read=lock == "SHARE", key_share=lock == "NO KEY UPDATE")
    return found.lateral()


def insert_events(rows: Select[Any]) -> Insert:
    """Event rows (run_id, seq, data); a seq stored already stands."""
    return (
        postgresql.insert(run_events)
        .from_select(["run_id", "seq", "data"], rows)
        .on_conflict_do_nothing()
    )


def statement() -> Select[tuple[int]]:
    """`PostgreSQL.append_events`' statement: the places (from 1) of the appends whose run
    has their revision, each of whose rows (`event_appends` says whose, by place) are
    written; the runs' rows locked in the order of their ids, as every such statement
    takes them."""
    given = (
        func.unnest(
            bindparam("run_ids", type_=ARRAY(String)),
            bindparam("revisions", type_=ARRAY(Integer)),
        )
        .table_valued("run_id", "revision", with_ordinality="n")
        .render_derived("w")
    )
    appends = select(given).order_by(given.c.run_id).cte("appends")
    locked = current(appends.c.run_id, appends.c.revision, "SHARE")
    writers = select(appends.c.n, locked.c.run_id).join_from(appends, locked, true()).cte("writers")
    new = (
        func.unnest(
            bindparam("event_appends", type_=ARRAY(BigInteger)),
            bindparam("event_seqs", type_=ARRAY(Integer)),
            bindparam("event_documents", type_=ARRAY(BYTEA)),
        )
        .table_valued("n", "seq", "data")
        .render_derived("e")
    )
    rows = select(writers.c.run_id, new.c.seq, new.c.data).join_from(
        new, writers, new.c.n == writers.c.n
    )
    return select(writers.c.n).add_cte(insert_events(rows).cte("new_events"))
