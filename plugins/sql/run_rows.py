"""How a `Run` is kept in its row of `runs`, derived from `Run` itself so that no field of
it can be forgotten: a field has a column of its own, or is written once with the run, or
(every other field, a new one included) changes as it goes and is rewritten by each save."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from runpoint.core.sealing import Codec, readable
from runpoint.core.types import Run
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.schema import runs

# kept in columns of their own (read back over the documents)
COLUMN_FIELDS = (
    "revision",
    "lease_owner",
    "lease_expires_at",
    "recoveries",
    "cancel_requested",
    "hidden",
)
# what a run is (ids, input, lineage, transcript layout): in `data`, written once
WRITE_ONCE_FIELDS = frozenset(
    {
        "run_id",
        "session_id",
        "agent_id",
        "team_id",
        "user_id",
        "input",
        "policy",
        "created_at",
        "segments",
        "previous_run_id",
        "forked_from_run_id",
        "forked_from_message_index",
        "forked_from_session_id",
        "regenerated_from",
        "parent_run_id",
        "parent_tool_call_id",
        "edits",
        "instructions",
    }
)


def _state_field(field: msgspec.structs.FieldInfo) -> tuple[str, Any, Any]:
    default = field.default
    if default is msgspec.NODEFAULT:
        default = msgspec.field(default_factory=field.default_factory)
    return field.name, field.type, default


# what changes as a run goes (status, counts, content, ...): the small `state` document
RunState = msgspec.defstruct(
    "RunState",
    [
        _state_field(f)
        for f in msgspec.structs.fields(Run)
        if f.name not in WRITE_ONCE_FIELDS and f.name not in COLUMN_FIELDS
    ],
    omit_defaults=True,
)
STATE_FIELDS: tuple[str, ...] = RunState.__struct_fields__
COLUMNS = (runs.c.run_id, runs.c.data, runs.c.state, *(runs.c[name] for name in COLUMN_FIELDS))
_decode_run = msgspec.json.Decoder(Run).decode
_decode_state = msgspec.json.Decoder(RunState).decode


def state_document(run: Run, codec: Codec) -> bytes:
    state = document(RunState(**{name: getattr(run, name) for name in STATE_FIELDS}))
    return codec.seal(state, runs.name, "state", run.run_id, team=run.team_id)


def run_row(run: Run, codec: Codec) -> dict[str, Any]:
    """The row a new run is inserted as."""
    return {
        "run_id": run.run_id,
        "session_id": run.session_id,
        "status": run.status.value,
        **{name: getattr(run, name) for name in COLUMN_FIELDS},
        "parent_run_id": run.parent_run_id,  # queried: a crew run's members
        "data": codec.seal(document(run), runs.name, "data", run.run_id, team=run.team_id),
        "state": state_document(run, codec),
    }


def decode_runs(rows: Sequence[Sequence[Any]], codec: Codec) -> list[Run]:
    """Runs from rows of `COLUMNS`."""
    return [decode_run(row, codec) for row in rows]


def readable_runs(rows: Sequence[Sequence[Any]], codec: Codec) -> list[Run]:
    """`decode_runs` but for the rows that do not open (see `sealing.readable`)."""
    return readable(rows, lambda row: decode_run(row, codec))


def decode_run(row: Sequence[Any], codec: Codec) -> Run:
    run_id, data, state, revision, owner, expires, recoveries, cancel, hidden = row
    return msgspec.structs.replace(
        _decode_run(codec.open(data, runs.name, "data", run_id)),
        **msgspec.structs.asdict(_decode_state(codec.open(state, runs.name, "state", run_id))),
        revision=revision,
        lease_owner=owner,
        lease_expires_at=expires,
        recoveries=recoveries,
        cancel_requested=bool(cancel),  # SQLite says 0 or 1
        hidden=bool(hidden),
    )
