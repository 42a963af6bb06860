"""The suite says what a broken backend breaks, and nothing else."""

from __future__ import annotations

from collections.abc import Sequence

from runpoint.conformance import run
from runpoint.core.types import Checkpoint, KeyAnswer, Message, Run, RunEvent, Segment
from runpoint.plugins.memory import MemoryStorage


class CarelessStorage(MemoryStorage):
    """Saves whatever revision a writer read, and lists checkpoints in the order they
    were written rather than by message index."""

    def __init__(self) -> None:
        super().__init__()
        self.written: list[str] = []  # checkpoint ids

    async def save(
        self,
        run: Run,
        messages: Sequence[Message],
        checkpoint: Checkpoint | None,
        *,
        intents: Sequence[str] = (),
        answering: KeyAnswer | None = None,
        events: Sequence[RunEvent] = (),
    ) -> None:
        stored = await self.get_run(run.run_id)
        if stored is not None:
            run.saved(stored.revision, run.cancel_requested)
        await super().save(
            run, messages, checkpoint, intents=intents, answering=answering, events=events
        )
        if checkpoint is not None:
            self.written.append(checkpoint.checkpoint_id)

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        listed = await super().list_checkpoints(segments, upto)
        return sorted(listed, key=lambda c: self.written.index(c.checkpoint_id))


async def test_the_suite_reports_exactly_what_a_backend_breaks() -> None:
    report = await run(CarelessStorage, skip={"processes", "encryption"})
    assert report.failed == {
        "save_with_a_stale_revision_is_a_conflict_and_writes_nothing",
        "of_two_concurrent_writers_one_wins",
        "a_boundary_appends_its_events_with_it",
        "checkpoints_are_listed_by_message_index",
    }, report
    failure = str(report).splitlines()[-1]
    assert failure.startswith("FAILED checkpoints/checkpoints_are_listed_by_message_index: ")
