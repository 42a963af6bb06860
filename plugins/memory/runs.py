"""Runs: inserts, one writer per run, cancel flags, leases and tool call records."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import msgspec

from runpoint.core.types import Checkpoint, KeyAnswer, Message, Run, RunEvent, RunStatus
from runpoint.plugins.memory.tables import IN_FLIGHT, Sealed, Tables, copy


class MemoryRuns(Tables):
    async def create_runs(
        self,
        runs: Sequence[Run],
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        with self._answering(answering):
            for session_id in {r.session_id for r in runs}:
                self._refuse_locked(self._live_session(session_id))
            self._refuse_taken_runs(runs)
            self._refuse_removed_sources(runs)
            self._insert_runs(runs, incoming)

    async def start_in_session(
        self, run: Run, incoming: Sequence[Message] = (), *, answering: KeyAnswer | None = None
    ) -> Run:
        with self._answering(answering):
            self._refuse_locked(self._live_session(run.session_id))
            self._refuse_in_flight(run.session_id)
            self._refuse_taken_runs([run])
            self._refuse_removed_sources([run])
            live = self._live_runs(run.session_id)
            run = msgspec.structs.replace(run, previous_run_id=live[-1].run_id if live else None)
            self._insert_runs([run], {run.run_id: incoming})
        return run

    async def get_run(self, run_id: str) -> Run | None:
        run = self._runs.get(run_id)
        return None if run is None else copy(run)

    async def list_runs(self, session_id: str) -> list[Run]:
        return [copy(r) for r in self._live_runs(session_id)]

    async def member_runs(self, run_id: str) -> list[Run]:
        members = (r for r in self._runs.values() if r.parent_run_id == run_id)
        return [copy(r) for r in sorted(members, key=lambda r: self._run_seqs[r.run_id])]

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
        with self._answering(answering):
            self._save(run, messages, checkpoint, intents, events)

    async def request_cancel(self, run_id: str) -> bool:
        run = self._runs.get(run_id)
        if run is None or run.status not in IN_FLIGHT:
            return False
        run.request_cancel()
        self._runs[run_id] = run
        return True

    async def renew_leases(self, owner: str, run_ids: Collection[str], until: float) -> None:
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run is not None and run.lease_owner == owner and run.status in IN_FLIGHT:
                run.lease_to(owner, until)
                self._runs[run_id] = run

    async def expired_runs(self, before: float, agent_ids: Collection[str]) -> list[Run]:
        return [
            copy(r)
            for r in self._runs.values()
            if r.status in IN_FLIGHT
            and not self._led(r)
            and r.agent_id in agent_ids
            and (r.lease_expires_at is None or r.lease_expires_at < before)
        ]

    def _led(self, run: Run) -> bool:
        """Whether the run is a member run whose crew run goes on (and resumes it)."""
        crew = self._runs.get(run.parent_run_id or "")
        return crew is not None and (crew.status in IN_FLIGHT or crew.status is RunStatus.PAUSED)

    async def record_tool_results(self, run_id: str, results: Sequence[Message]) -> None:
        for result in results:
            call = (run_id, result.tool_call_id or "")
            if call in self._tool_calls and (run := self._runs.get(run_id)) is not None:
                binding = ("tool_calls", "result", *call)
                self._tool_calls[call] = Sealed(self._seal(result, run.team_id, *binding))

    async def tool_records(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> dict[str, Message | None]:
        records = {}
        for call_id in tool_call_ids:
            if (run_id, call_id) in self._tool_calls:
                found = self._tool_calls[run_id, call_id]
                records[call_id] = (
                    None
                    if found is None
                    else self._open(Message, found.data, "tool_calls", "result", run_id, call_id)
                )
        return records
