"""The run loop: model turn -> tool batch -> policy -> durable write -> next turn.

The next step is read off the transcript's tail, so a new run, a fork, a resume after a
pause and a resume after a crash all enter the loop the same way:
- the last assistant turn has tool calls without results: run that batch;
- the last assistant turn is a final answer: the run is complete;
- otherwise (a user message, or a finished batch): ask the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec

from runpoint.core import transcript
from runpoint.core.cancels import stop_if_cancelled
from runpoint.core.group_commit import GroupCommit
from runpoint.core.types import (
    Approval,
    Decision,
    Message,
    Run,
    RunStatus,
    Timing,
    ToolCall,
    WaitingCall,
    stopwatch,
)
from runpoint.runs import tool_calls
from runpoint.runs.boundary_write import BoundaryWriter
from runpoint.seams.crew import DELEGATE, MembersPaused, delegating
from runpoint.seams.host import RunHooks
from runpoint.seams.model import (
    Model,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
)


@dataclass(kw_only=True)
class Execution(BoundaryWriter):
    """One execution of a run: its collaborators and its in-memory state."""

    model: Model
    watched: bool  # whether the client that started it streams it (the vendor's deltas)
    incoming: Sequence[Message] = ()  # the new input that starts it, written with the run
    history: list[Message] = field(default_factory=list)  # earlier runs, as context
    model_memo: dict[Any, Any] = field(default_factory=dict)  # see ModelRequest.memo
    # a person's decisions on the paused batch (by tool_call_id), as written with the run
    decisions: Mapping[str, Decision] = field(default_factory=dict, init=False)
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)
    resumed: bool = False
    call_ids: set[str] = field(default_factory=set)  # the transcript's, each once
    # a crew's leader: runs a delegation call (the crew run, the call, member, task)
    delegate: Callable[[Run, ToolCall, str, str], Awaitable[str]] | None = None

    async def execute(self) -> Run:
        accepted = self.run.status is RunStatus.PENDING
        self.decisions = dict(self.run.decisions)
        self.run.start()
        self.event("RunContinued" if self.resumed else "RunStarted", model=self.model.name)
        self.hook.runpoint_run_started(run=self.run)
        try:
            await self.outlast(self.load_context)
            announce(self.hook, self.run, self.incoming)
            if accepted:  # a run accepted in the background: it is RUNNING from here on
                await self.save(checkpoint=None)
            while True:
                if calls := transcript.unanswered_calls(self.transcript):
                    records = await self.tool_records(calls)
                    # started and not known to have finished, and nobody decided since
                    started = [c.id for c in calls if c.id in records and records[c.id] is None]
                    self.run.mark_in_doubt([i for i in started if i not in self.decisions])
                    if self.run.in_doubt or tool_calls.undecided(self.agent, calls, self.decisions):
                        if self.cancelled():  # accepted while the run waited: it wins
                            return await self.finish(RunStatus.CANCELLED, "RunCancelled")
                        return await self.pause(calls)
                    try:
                        await self.tool_batch(calls, records)
                    except MembersPaused as paused:
                        return await self.pause_for_members(paused)
                elif self.transcript and self.transcript[-1].role == "assistant":
                    return await self.finish(RunStatus.COMPLETED, "RunCompleted")
                elif self.cancelled():  # it stops where all is whole
                    return await self.finish(RunStatus.CANCELLED, "RunCancelled")
                elif self.model_turns >= self.agent.max_turns:
                    limit = f"the run reached its limit of {self.agent.max_turns} turns"
                    return await self.finish(RunStatus.ERROR, "RunError", limit)
                else:
                    await self.model_turn()
        except Exception as exc:  # a model or tool-infrastructure failure ends the run
            # not a cancel (this process closing) that surfaced as an error: as a cancel,
            # it leaves the run to the lease watch
            stop_if_cancelled(exc)
            if self.outlast.outages.of(exc, counted=False) is not None:
                raise  # the database's, not the run's: the lease watch resumes it later
            return await self.finish(RunStatus.ERROR, "RunError", f"{type(exc).__name__}: {exc}")

    # -- steps -------------------------------------------------------------------

    async def load_context(self) -> None:
        """This run's transcript so far, and the transcripts of the runs it follows in
        its session (oldest first, each cut where it was whole)."""
        run = self.run
        self.history = []  # read anew if a read failed part way (an outage)
        written = run.message_count - len(self.incoming)  # the incoming are in hand already
        self.loaded([*await self.storage.read_messages(run.segments, written), *self.incoming])
        self.turns_before, self.batches_before = transcript.turns_and_batches(self.transcript)
        self.call_ids = transcript.call_ids(self.transcript)
        previous, depth = run.previous_run_id, self.agent.history_runs
        while previous is not None and (depth is None or depth > 0):
            earlier = await self.storage.get_run(previous)
            if earlier is None:
                break
            messages = await self.storage.read_messages(earlier.segments, earlier.message_count)
            self.history[:0] = messages[: transcript.safe_boundary(messages, len(messages))]
            previous = earlier.previous_run_id
            depth = None if depth is None else depth - 1

    async def model_turn(self) -> None:
        self.event("ModelRequestStarted", model=self.model.name)
        instructions = self.run.instructions
        request = ModelRequest(
            instructions=self.agent.instructions if instructions is None else instructions,
            messages=self.history + self.transcript,
            tools=[t.schema for t in self.agent.tool_map.values()],
            watched=self.watched,
            memo=self.model_memo,
        )
        took = stopwatch()
        try:
            response = await self.respond(request)
        except Exception as exc:
            self.hook.runpoint_model_turn_done(
                run=self.run, model=self.model.name, message=None, error=exc, timing=took()
            )
            raise
        timing = took()
        self.model_turns += 1
        message = Message(
            role="assistant",
            content=response.content,
            tool_calls=response.tool_calls or None,
            usage=response.usage,
            model=self.model.name,
        )
        self.append(message)
        self.hook.runpoint_model_turn_done(
            run=self.run, model=self.model.name, message=message, error=None, timing=timing
        )
        self.event("ModelRequestCompleted", usage=response.usage)

    async def respond(self, request: ModelRequest) -> ModelResponse:
        """The model's turn, its deltas passed on as events as they come."""
        response: ModelResponse | None = None
        async for chunk in self.model.stream(request):
            if isinstance(chunk, TextDelta):
                self.event("RunContent", content=chunk.text)
            elif isinstance(chunk, ToolCallDelta):
                self.event("ToolCallDelta", **msgspec.structs.asdict(chunk))
            else:
                response = chunk
        if response is None:
            raise RuntimeError(f"model {self.model.name} ended its turn without a response")
        tool_calls.check_ids(self.model.name, response.tool_calls, self.call_ids)
        self.call_ids.update(c.id for c in response.tool_calls)
        return response

    async def tool_records(self, calls: list[ToolCall]) -> dict[str, Message | None]:
        """What is recorded of these calls' side effects. Only a batch this execution
        found under way (it has had no model turn yet) can have records."""
        if self.model_turns:
            return {}
        ids = [c.id for c in calls]
        return await self.outlast(lambda: self.storage.tool_records(self.run.run_id, ids))

    async def tool_batch(self, calls: list[ToolCall], records: dict[str, Message | None]) -> None:
        for call in calls:
            self.event("ToolCallStarted", tool=tool_calls.info(call, self.decisions.get(call.id)))
        # Durably first, in one write: the intent of each side-effecting call starting now,
        # and the decisions to run one, spent (a call runs once per decision; if its process
        # dies in it, it is in doubt and a person decides again). Other decisions stay until
        # the batch is done: applied again, they run nothing twice. A lost turn is simply
        # asked again, unless one of its calls may have acted.
        starting = [
            c.id for c in calls if c.id not in records and tool_calls.is_recorded(self.agent, c)
        ]
        spent = {
            c.id
            for c in calls
            if tool_calls.is_recorded(self.agent, c)
            and tool_calls.approved(self.decisions.get(c.id))
        }
        # a delegation's member run is found by its call's id (runpoint.runs.crews): the
        # turn naming it is durable before it starts, or a resumed leader would ask its
        # model again, which names its calls afresh, and the members would start over
        delegates = bool(self.unsaved) and any(c.name == DELEGATE for c in calls)
        if starting or spent or delegates:
            self.run.spend_decisions(spent)
            await self.save(checkpoint=None, intents=starting)
        # each side effect's result is durable before its call counts as done; the results
        # that finish while one write goes share the next, so a batch of any width holds
        # one connection, not one a call
        recorder: GroupCommit[Message, None] = GroupCommit(self.record_tool_results)
        outcomes = await asyncio.gather(
            *(self.outcome(call, records, recorder) for call in calls), return_exceptions=True
        )
        messages = [m for m in outcomes if isinstance(m, Message)]
        if failed := [e for e in outcomes if not isinstance(e, Message | MembersPaused)]:
            raise failed[0]
        if paused := [e for e in outcomes if isinstance(e, MembersPaused)]:
            # its members' finished runs keep their answers, read when it goes on
            raise MembersPaused([t for p in paused for t in p.tools])
        for call, message in zip(calls, messages, strict=True):
            self.append(message)
            self.event(
                "ToolCallCompleted",
                tool=tool_calls.info(call, self.decisions.get(call.id))
                | {"result": message.content, "tool_call_error": message.tool_call_error},
            )
        self.run.clear_batch()  # its decisions applied: cleared with the batch's results
        self.tool_batches += 1
        # the batch's turn, not the whole transcript: a batch's cost stays flat
        last_turn = transcript.last_turn(self.transcript)
        executions = transcript.tool_executions(self.transcript, start=last_turn)[-len(calls) :]
        self.hook.runpoint_tool_batch_done(run=self.run, executions=executions)
        await self.reach_boundary("tool_batch", calls)

    async def outcome(
        self,
        call: ToolCall,
        records: dict[str, Message | None],
        recorder: GroupCommit[Message, None],
    ) -> Message:
        """The result of one call: replayed if it finished before, given by a person, or
        from running it (then recorded, if it has side effects)."""
        if (finished := records.get(call.id)) is not None:
            return finished  # never run twice
        decision = self.decisions.get(call.id)
        ran: Timing | None = None  # how long the tool took, if it was called
        if isinstance(decision, str):
            result, failed = decision, False
        elif refused := tool_calls.refusal(self.agent, call, decision, in_doubt=call.id in records):
            result, failed = refused, True
        else:
            if self.delegate is not None:  # this task's own context: its call's
                delegating.set(partial(self.delegate, self.run, call))
            took = stopwatch()
            result, failed = await tool_calls.run(self.agent, call, decision)
            ran = took()
        message = Message(
            role="tool",
            content=result,
            tool_call_id=call.id,
            tool_name=call.name,
            tool_args=tool_calls.arguments(call, decision),
            tool_call_error=failed,
            ruling=tool_calls.ruling(decision),
        )
        if ran is not None:
            self.hook.runpoint_tool_call_done(run=self.run, message=message, timing=ran)
        if call.id in records or tool_calls.is_recorded(self.agent, call):
            await recorder.submit(message)
        return message

    async def record_tool_results(self, results: Sequence[Message]) -> list[None]:
        # a result that ran must be stored: else the call is in doubt, a person's to decide
        await self.outlast(lambda: self.storage.record_tool_results(self.run.run_id, results))
        return [None] * len(results)

    def cancelled(self) -> bool:
        """Whether a cancel was accepted for the run, here or in another process."""
        return self.cancel_requested.is_set() or self.run.cancel_requested

    async def pause(self, calls: list[ToolCall]) -> Run:
        """Stop before a batch that needs a person's decision (a call to confirm, or one
        that may or may not have run); continue with `tools` resumes here."""
        self.run.end(RunStatus.PAUSED)
        waiting = {c.id for c in tool_calls.undecided(self.agent, calls, self.decisions)} | set(
            self.run.in_doubt
        )
        # the approval before the pause: a pause that was written always has its approval
        approval = Approval.of(
            self.run,
            [
                WaitingCall(c.id, c.name, c.arguments, c.id in self.run.in_doubt)
                for c in calls
                if c.id in waiting
            ],
            self.agent.approval_timeout,
        )
        await self.outlast(lambda: self.storage.add_approval(approval))
        self.event(
            "RunPaused",
            tools=[
                # every call listed waits on a person: Agno's clients confirm what says so
                tool_calls.info(c)
                | {"in_doubt": c.id in self.run.in_doubt, "requires_confirmation": True}
                for c in calls
                if c.id in waiting
            ],
        )
        await self.save(checkpoint=None)
        self.hook.runpoint_approval_requested(approval=approval, run=self.run)
        self.hook.runpoint_run_finished(run=self.run)
        return self.run

    async def pause_for_members(self, paused: MembersPaused) -> Run:
        """Stop where members' runs wait for a person (each has its approval); a continue
        with `tools` decides their calls and resumes this run and theirs."""
        self.run.end(RunStatus.PAUSED)
        self.event("RunPaused", tools=[t | {"requires_confirmation": True} for t in paused.tools])
        await self.save(checkpoint=None)
        self.hook.runpoint_run_finished(run=self.run)
        return self.run

    async def finish(self, status: RunStatus, event: str, error: str | None = None) -> Run:
        self.run.end(status, error)
        if status is RunStatus.COMPLETED:
            self.event("RunContentCompleted")
        await self.reach_boundary("end", ending=event)
        self.hook.runpoint_run_finished(run=self.run)
        return self.run


def announce(hook: RunHooks, run: Run, incoming: Sequence[Message]) -> None:
    """Tell plugins about a run's input, written with the run (the last messages of its
    `message_count`)."""
    first = run.message_count - len(incoming)
    for index, message in enumerate(incoming, first):
        hook.runpoint_message_appended(run=run, message=message, index=index)
