"""Transcripts laid out by segments, and their checkpoints."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import msgspec

from runpoint.core.types import Checkpoint, Message, MessageView, Role, Segment
from runpoint.plugins.memory.tables import T, Tables


class MemoryTranscripts(Tables):
    async def read_messages(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[Message]:
        found = []
        for run_id, rows, lo, hi in self._cut(self._messages, segments, upto):
            found += [
                self._open(Message, rows[i].data, "messages", "data", run_id, i)
                for i in range(max(lo, start), hi)
                if i in rows
            ]
        return found

    async def read_views(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[MessageView]:
        messages = await self.read_messages(segments, upto, start)
        return msgspec.json.decode(msgspec.json.encode(messages), type=list[MessageView])

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        for _, rows, lo, hi in reversed(list(self._cut(self._messages, segments, before))):
            for i in range(hi - 1, lo - 1, -1):
                if i in rows and rows[i].role == role:
                    return i
        return None

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        # a segment's checkpoints lie in (start, end]: the one at a fork point is its source's
        found = [
            self._open(Checkpoint, mark.data, "checkpoints", "data", run_id, i)
            for run_id, marks, lo, hi in self._cut(self._checkpoints, segments, upto)
            for i, mark in marks.items()
            if lo < i <= hi
        ]
        return sorted(found, key=lambda c: c.message_index)

    @staticmethod
    def _cut(
        table: Mapping[str, dict[int, T]], segments: Sequence[Segment], upto: int | None
    ) -> Iterator[tuple[str, dict[int, T], int, int]]:
        """For each segment, its run, its run's rows in `table` and its bounds [start,
        end), cut at `upto` and past the last row."""
        for segment in segments:
            rows = table.get(segment.run_id, {})
            last = max(rows, default=segment.start)
            end = min(e for e in (segment.end, upto, last + 1) if e is not None)
            if segment.start < end:
                yield segment.run_id, rows, segment.start, end
