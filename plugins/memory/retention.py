"""Retention: finished runs a batch at a time, and removals that respect lineage."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

import msgspec

from runpoint.core import transcript
from runpoint.core.types import Run, Segment, SessionCapture
from runpoint.plugins.memory.tables import Tables, copy
from runpoint.seams.retention import FINISHED, Removed, removable

_decode_capture = msgspec.json.Decoder(SessionCapture).decode
_size = len  # a document's bytes, as the SQL backend counts them
_encode = msgspec.json.encode


class MemoryRetention(Tables):
    removals_per_transaction = 50  # a removal holds up nothing but itself

    async def finished_runs(self, after: int, limit: int) -> tuple[list[Run], int]:
        found = [
            (seq, run)
            for run_id, seq in self._run_seqs.items()
            if seq > after and (run := self._runs[run_id]).status in FINISHED
        ][:limit]
        return [copy(r) for _, r in found], found[-1][0] if len(found) == limit else 0

    async def remove_runs(self, run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
        session_ids = {self._runs[i].session_id for i in run_ids if i in self._runs}
        open_ids = {s for s in session_ids if self._sessions[s].locked is None}
        every = [self._runs[i] for s in open_ids for i in self._session_runs[s]]
        doomed = removable(every, set(run_ids))
        emptied = {r.session_id for r in every} - {
            r.session_id for r in every if r.run_id not in doomed
        }
        captured = {
            i
            for i, row in self._session_checkpoints.items()
            if row.checkpoint.session_id in emptied
        }
        removed = self._erase(doomed | captured, doomed, dry_run)
        removed.runs, removed.run_ids, removed.sessions = len(doomed), sorted(doomed), len(emptied)
        if not dry_run:
            self._delete_sessions(emptied)
        return removed

    async def trim_checkpoints(self, run_id: str, keep: int, *, dry_run: bool = False) -> Removed:
        run = self._runs.get(run_id)
        marks = self._checkpoints.get(run_id, {})
        if run is None or run.status not in FINISHED:
            return Removed()
        kept = set(sorted(marks)[-max(keep, 1) :])  # the end is the last
        read = self._reads(set()).get(run_id, [])
        doomed = [m for m in marks if m not in kept and not _holds_checkpoint(read, m)]
        removed = Removed(
            checkpoints=len(doomed), size=sum(_size(_encode(marks[m])) for m in doomed)
        )
        if not dry_run:
            for m in doomed:
                del marks[m]
        return removed

    async def drop_events(self, run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
        removed = Removed()
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run is not None and run.status in FINISHED and (log := self._events.get(run_id)):
                removed += Removed(events=len(log), size=sum(_size(_encode(e)) for e in log))
                if not dry_run:
                    del self._events[run_id]
        return removed

    async def reclaim_space(self, pages: int) -> int:
        return 0  # memory is the interpreter's

    def _erase(self, readers: set[str], run_ids: set[str], dry_run: bool = False) -> Removed:
        """As runpoint.plugins.sql.erase.erase: the runs `run_ids` and the lineage of
        `readers` go, then the rows of gone runs that nothing left reads."""
        sources = set(run_ids) | {s.run_id for _, s in self._read_segments(readers)}
        reads = self._reads(readers)
        removed = Removed()
        for run_id in run_ids:
            log = self._events.get(run_id, [])
            removed += Removed(events=len(log), size=sum(_size(_encode(e)) for e in log))
        for source in sources - (self._runs.keys() - run_ids):
            read = reads.get(source, [])
            rows = self._messages.get(source, {})
            marks = self._checkpoints.get(source, {})
            gone = [i for i in rows if not any(s.start <= i < _end(s) for s in read)]
            unmarked = [i for i in marks if not _holds_checkpoint(read, i)]
            removed += Removed(
                messages=len(gone),
                checkpoints=len(unmarked),
                size=sum(_size(_encode(rows[i])) for i in gone)
                + sum(_size(_encode(marks[i])) for i in unmarked),
            )
            if not dry_run:
                for i in gone:
                    del rows[i]
                for i in unmarked:
                    del marks[i]
        if not dry_run:
            for run_id in run_ids:
                run = self._runs.pop(run_id)
                self._run_seqs.pop(run_id)
                self._session_runs[run.session_id].remove(run_id)
                self._events.pop(run_id, None)
            self._tool_calls = {k: v for k, v in self._tool_calls.items() if k[0] not in run_ids}
            for approval_id in [k for k, a in self._approvals.items() if a.run_id in run_ids]:
                del self._approvals[approval_id]
            for checkpoint_id in readers - run_ids:
                self._session_checkpoints.pop(checkpoint_id, None)
        return removed

    def _delete_sessions(self, session_ids: Collection[str]) -> None:
        """Delete sessions whose runs are erased, with their session checkpoints."""
        for session_id in session_ids:
            del self._sessions[session_id], self._session_runs[session_id]
        self._session_checkpoints = {
            i: row
            for i, row in self._session_checkpoints.items()
            if row.checkpoint.session_id not in session_ids
        }

    def _read_segments(
        self, readers: Collection[str] | None = None
    ) -> Iterator[tuple[str, Segment]]:
        """(reader, segment) for each segment of another run's rows a run reads, and each a
        READY session checkpoint's capture reads; only those of `readers` if given."""
        for run in self._runs.values():
            if readers is None or run.run_id in readers:
                yield from ((run.run_id, s) for s in transcript.inherited(run))
        for checkpoint_id, row in self._session_checkpoints.items():
            if row.capture is not None and (readers is None or checkpoint_id in readers):
                runs = _decode_capture(row.capture).runs
                yield from ((checkpoint_id, s) for s in transcript.captured(runs))

    def _reads(self, leaving: Collection[str]) -> dict[str, list[Segment]]:
        """The segments read by the readers but those `leaving`, by the run they read."""
        found: dict[str, list[Segment]] = {}
        for reader, segment in self._read_segments():
            if reader not in leaving:
                found.setdefault(segment.run_id, []).append(segment)
        return found


def _end(segment: Segment) -> float:
    return float("inf") if segment.end is None else segment.end


def _holds_checkpoint(read: Sequence[Segment], index: int) -> bool:
    """Whether a segment read holds the checkpoint at `index` (it owns (start, end])."""
    return any(s.start < index <= _end(s) for s in read)
