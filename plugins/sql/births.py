"""New sessions with the runs they start and the runs' input, written in one go: every row
as it would stand had the runs been inserted and their input then saved (see
`Database.write_save`): each input takes the next places of its session's event log,
one per message and one for the boundary, and bumps its run's revision. Nobody writes to
a session before it exists, so its cursor is known here and nothing needs reading."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from runpoint.core import transcript
from runpoint.core.sealing import Codec
from runpoint.core.types import Message, Run, Segment, Session
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.run_rows import run_row
from runpoint.plugins.sql.schema import NO_END, messages, run_reads, runs, sessions

# the tables of a `Births`' rows, field by field, in the order they are inserted
TABLES = (sessions, runs, messages, run_reads)


class Births(NamedTuple):
    """The rows to insert, by table (`TABLES`)."""

    sessions: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    reads: list[dict[str, Any]]

    def written(self, runs: Sequence[Run]) -> None:
        """Once the rows are written: each run's revision as its row has it."""
        revisions = {row["run_id"]: row["revision"] for row in self.runs}
        for run in runs:
            run.saved(revisions[run.run_id], run.cancel_requested)


def births(
    sessions: Sequence[Session],
    runs: Sequence[Run],
    incoming: Mapping[str, Sequence[Message]],
    codec: Codec,
) -> Births:
    """The rows of `sessions` and of the `runs` they start, with their input."""
    cursors = {s.session_id: s.event_seq for s in sessions}
    born_runs, born_messages = [], []
    for run in runs:
        if run.session_id not in cursors:
            raise ValueError(f"run {run.run_id} does not start one of these sessions")
        row = run_row(run, codec)
        if new := incoming.get(run.run_id):
            first, place = run.message_count - len(new), cursors[run.session_id] + 1
            born_messages += [
                {
                    "run_id": run.run_id,
                    "idx": first + n,
                    "role": m.role,
                    "data": codec.seal(
                        document(m), messages.name, "data", run.run_id, first + n, team=run.team_id
                    ),
                    "event_seq": place + n,
                }
                for n, m in enumerate(new)
            ]
            cursors[run.session_id] += len(new) + 1
            row["revision"] += 1
        born_runs.append(row)
    session_rows = [session_row(s, cursors[s.session_id]) for s in sessions]
    return Births(session_rows, born_runs, born_messages, read_rows(runs))


def session_row(session: Session, event_seq: int) -> dict[str, Any]:
    # the cursor, the lock and the name live in their columns only: no stale copy in the
    # document (the name is written apart, as a rename: most sessions have none)
    stored = msgspec.structs.replace(session, event_seq=0, locked=None, session_name=None)
    return {
        "session_id": session.session_id,
        "agent_id": session.agent_id,
        "team_id": session.team_id,
        "forked_from_session_id": session.forked_from_session_id,
        "created_at": session.created_at,
        "event_seq": event_seq,
        "data": document(stored),
    }


def read_rows(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """The `run_reads` rows of new runs: the segments of other runs' rows they read."""
    return reads_of([(run.run_id, transcript.inherited(run)) for run in runs])


def reads_of(readers: Sequence[tuple[str, Sequence[Segment]]]) -> list[dict[str, Any]]:
    """`run_reads` rows: each reader's segments (a reader reads each at most once)."""
    rows = {
        (s.run_id, reader, s.start): {
            "source_run_id": s.run_id,
            "reader": reader,
            "lo": s.start,
            "hi": NO_END if s.end is None else s.end,
        }
        for reader, segments in readers
        for s in segments
    }
    return list(rows.values())
