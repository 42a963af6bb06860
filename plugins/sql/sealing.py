"""The SQL backend's sealed columns (see runpoint.core.sealing): each named with the key
of its row, which with the table and column is a document's binding."""

from __future__ import annotations

from typing import NamedTuple

from runpoint.plugins.sql.schema import (
    approvals,
    checkpoints,
    messages,
    run_events,
    runs,
    schedules,
    session_checkpoints,
    tool_calls,
)

# the `secrets` row that says `runpoint db encrypt` is under way: rows in the clear are
# read as such only then
UNDER_WAY = "encryption-under-way"


class SealedColumns(NamedTuple):
    table: str
    key: tuple[str, ...]  # the row's primary key
    columns: tuple[str, ...]


SEALED = (
    SealedColumns(runs.name, ("run_id",), ("data", "state")),
    SealedColumns(messages.name, ("run_id", "idx"), ("data",)),
    SealedColumns(checkpoints.name, ("run_id", "message_index"), ("data",)),
    SealedColumns(run_events.name, ("run_id", "seq"), ("data",)),
    SealedColumns(tool_calls.name, ("run_id", "tool_call_id"), ("result",)),
    SealedColumns(session_checkpoints.name, ("checkpoint_id",), ("capture",)),
    SealedColumns(approvals.name, ("id",), ("data",)),  # the paused calls' arguments
    SealedColumns(schedules.name, ("schedule_id",), ("data",)),  # the message of its runs
)
