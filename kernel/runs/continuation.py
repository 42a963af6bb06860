"""Continue: resume a run in place, or branch a new run off one of its boundaries.

Only "continue from end" of a PAUSED, ERROR or interrupted run resumes the same run;
everything else creates a new run with lineage, so history is never rewritten.
"""

from __future__ import annotations

from functools import partial

import msgspec

from runpoint.core import transcript
from runpoint.core.errors import Conflict, InvalidRequest, NotContinuable
from runpoint.core.types import (
    IN_FLIGHT,
    Decision,
    KeyClaim,
    Message,
    Run,
    RunStatus,
    ToolCall,
    new_id,
)
from runpoint.durable import idempotency
from runpoint.reads import continue_points
from runpoint.reads.continue_points import ContinueFrom
from runpoint.runs import edits, tool_calls
from runpoint.runs.context import RunContext
from runpoint.runs.edits import EditRequest
from runpoint.runs.executor import Executor, RunHandle
from runpoint.seams.agent import Agent
from runpoint.seams.crew import Crew

# statuses of a run that "continue from end" picks up again in place
RESUMABLE = {RunStatus.PAUSED, RunStatus.ERROR, RunStatus.RUNNING}


class Branch(msgspec.Struct, frozen=True, kw_only=True):
    """What a new run forked at a boundary starts with, besides its source's history:
    edits to that history, a new input, and a model or instructions of its own."""

    input: str | None = None
    edits: list[EditRequest] = []
    model: str | None = None
    instructions: str | None = None


class ContinueRun(msgspec.Struct, frozen=True, kw_only=True):
    """Continue `run_id` from a boundary (see `Continuation.start`)."""

    run_id: str
    session_id: str | None = None
    agent_id: str | None = None
    continue_from: ContinueFrom = "end"
    input: str | None = None
    fork: bool = False
    regenerate: bool = False
    replace_original: bool | None = None
    # a person's decisions on a paused run's tool calls, by tool_call_id
    tools: dict[str, Decision] | None = None
    # edits to the messages before the boundary: the continue makes a new run (a fork)
    edits: list[EditRequest] = []
    model: str | None = None
    background: bool = False
    # only if the run is in this status (else Conflict): a requeue resumes a failed run
    expect: RunStatus | None = None
    # a crew run's member run to continue from instead (`runpoint.runs.member_continue`);
    # unset, not None: left out of the fingerprint, so keys claimed before it existed match
    member_run_id: str | msgspec.UnsetType = msgspec.UNSET


class Continuation:
    def __init__(self, context: RunContext, executor: Executor) -> None:
        self.storage = context.storage
        self.host = context.host
        self.leases = context.leases
        self.queries = context.queries
        self.sessions = context.sessions
        self.executor = executor

    async def start(
        self, request: ContinueRun, stream: bool, claim: KeyClaim | None = None
    ) -> RunHandle:
        """Resume a run in place, or start a new run from one of its boundaries; the write
        that does answers `claim`, if the request came with an Idempotency-Key.

        `regenerate` re-answers the run's final answer in a new run (tool work is kept)
        and, unless `replace_original` is False, marks the source REGENERATED. `tools` maps
        the tool_call_id of a paused call to a person's decision (`runpoint.core.types.Decision`):
        run it, with edited arguments perhaps; do not, saying why perhaps; or its result.
        """
        source = await self.source(request.run_id, request.session_id, request.agent_id)
        if request.expect is not None and source.status is not request.expect:
            raise Conflict(
                f"run {source.run_id} is {source.status.value}, not {request.expect.value}"
            )
        agent = self.queries.agent(source.agent_id)
        source_is_crew = isinstance(agent, Crew)
        self._refuse_contradictions(request, source)
        index = await self._requested_boundary(request, source)
        in_place = (
            index == source.message_count
            and not request.fork
            and not request.regenerate
            and not request.edits
            and source.status in RESUMABLE
        )
        # in place, the loop picks up whatever the tail holds (a paused batch, say);
        # a new run starts from a whole boundary
        index, last_turn = await continue_points.whole(self.storage, source, index)
        if request.tools and in_place and source.status is RunStatus.PAUSED and source_is_crew:
            # a crew run waits on its members' calls: the decisions are theirs
            member = None if request.member_run_id is msgspec.UNSET else request.member_run_id
            await self.executor.crews.pass_decisions(source, request.tools, member)
            request = msgspec.structs.replace(request, tools=None)
        if request.tools and not (in_place and source.status is RunStatus.PAUSED):
            if source.status in IN_FLIGHT:  # another continue of the paused run won the race
                raise Conflict(f"run {source.run_id} is in flight; it is no longer paused")
            if await self._decided_meanwhile(agent, request, source):
                raise Conflict(
                    f"run {source.run_id} is no longer paused: another request decided its "
                    f"calls and it went on (it is {source.status.value} now)"
                )
            raise InvalidRequest("tool decisions apply only to continuing a paused run from end")
        if in_place:
            pending = transcript.unanswered_calls(last_turn)
            return await self._resume(agent, source, pending, request, stream, claim)
        return await self._branch(agent, source, index, request, stream, claim)

    async def _decided_meanwhile(self, agent: Agent, request: ContinueRun, source: Run) -> bool:
        """Whether decisions meant to resume the run in place name calls it made that it
        could pause on (to be confirmed, or side effects that may be in doubt): then
        another request resumed it first (a lost race, not a bad request)."""
        if request.continue_from != "end" or request.fork or request.regenerate or request.edits:
            return False
        messages = await self.storage.read_messages(source.segments, source.message_count)
        tools = agent.tool_map
        pausing = {
            c.id
            for m in messages
            if m.role == "assistant"
            for c in m.tool_calls or ()
            if c.name in tools
            and (tools[c.name].requires_confirmation or tool_calls.is_recorded(agent, c))
        }
        return not pausing.isdisjoint(request.tools or ())

    async def source(self, run_id: str, session_id: str | None, agent_id: str | None) -> Run:
        """The run to continue, once its session's lock (a rollback's, perhaps) is settled;
        NotContinuable if it was rolled back out of its session."""
        find = partial(self.queries.run, run_id, session_id=session_id, agent_id=agent_id)
        source = await find()
        session = await self.storage.get_session(source.session_id)
        if session is not None and session.locked is not None:
            await self.sessions.settle_lock(session)
            source = await find()  # rolled back, perhaps
        if source.hidden:
            raise NotContinuable(
                f"run {source.run_id} was rolled back out of its session; it is history only"
            )
        return source

    def check(self, branch: Branch) -> None:
        """Refuse what a new run cannot start with, before anything starts."""
        if branch.input is not None and not branch.input.strip():
            raise InvalidRequest("input must not be empty")
        if branch.model is not None:
            self.host.model(branch.model)  # unknown providers fail here

    def _refuse_contradictions(self, request: ContinueRun, source: Run) -> None:
        self.check(Branch(input=request.input, model=request.model))
        if request.replace_original is not None and not request.regenerate:
            raise InvalidRequest("replace_original applies only with regenerate")
        if request.regenerate and (
            request.input is not None
            or request.fork
            or request.continue_from != "end"
            or request.edits
        ):
            raise InvalidRequest(
                "regenerate chooses its own boundary and always makes a new run; "
                "it takes no input, fork, continue_from or edits"
            )

    async def _requested_boundary(self, request: ContinueRun, source: Run) -> int:
        if not request.regenerate:
            return await continue_points.named(self.storage, source, request.continue_from)
        index = await continue_points.before_final_answer(self.storage, source)
        if index == source.message_count:
            raise NotContinuable(f"run {source.run_id} has no final answer to regenerate")
        return index

    async def _resume(
        self,
        agent: Agent,
        run: Run,
        pending: list[ToolCall],
        request: ContinueRun,
        stream: bool,
        claim: KeyClaim | None,
    ) -> RunHandle:
        """Pick the run up again where it stopped, with a new input or a person's decisions."""
        was = run.status
        try:
            self.executor.refuse_active(run)
            decisions = tool_calls.checked(agent, pending, request.tools or {})
            if pending and request.input is not None:
                raise InvalidRequest(
                    "the run is waiting for tool decisions; send `tools`, not a new input"
                )
            new = [Message(role="user", content=request.input)] if request.input is not None else []
            if self.leases.is_held_elsewhere(run):
                raise Conflict(f"run {run.run_id} is executing in another process")
            # Claim the run, with its new input or the person's decisions (added to those
            # of an earlier continue the batch still waits on): whoever executes it reads
            # them from the run. A concurrent continue of it (here or in another process)
            # read the same revision, and its claim now fails with Conflict.
            run.continue_with(len(new), decisions, request.model)
            self.executor.accept(run, background=request.background, stream=stream)
            answering = idempotency.answering(claim, run.run_id)
            await self.storage.save(run, new, None, answering=answering)
        except Conflict:
            if was in IN_FLIGHT:  # it was executing (here, or in a process now gone)
                raise
            # it had stopped, and another request continued it first: say what it made of it
            now = await self.storage.get_run(run.run_id)
            state = "deleted" if now is None else f"{now.status.value} now"
            raise Conflict(
                f"run {run.run_id} is no longer {was.value.lower()}: another request "
                f"continued it first (it is {state})"
            ) from None
        return await self.executor.begin(
            agent,
            run,
            new,
            stream=stream,
            background=request.background,
            resumed=True,
        )

    async def _branch(
        self,
        agent: Agent,
        source: Run,
        index: int,
        request: ContinueRun,
        stream: bool,
        claim: KeyClaim | None,
    ) -> RunHandle:
        """A new run from the source's boundary `index`, pointing at its rows below it.
        From the end of an ended run with nothing new, the model takes another turn, as
        AgentOS continues a COMPLETED run."""
        if request.regenerate and request.replace_original is not False:
            if source.status in IN_FLIGHT:
                raise Conflict(f"run {source.run_id} is in flight; it cannot be replaced yet")
            source.mark_regenerated()
            await self.storage.save(source, [], None)
        branch = Branch(input=request.input, edits=request.edits, model=request.model)
        run, rows, new = await self.fork(agent, source, index, branch, request.regenerate)
        self.executor.accept(run, background=request.background, stream=stream)
        await self.storage.create_runs(
            [run], {run.run_id: rows}, answering=idempotency.answering(claim, run.run_id)
        )
        return await self.executor.begin(
            agent, run, new, stream=stream, background=request.background
        )

    async def fork(
        self,
        agent: Agent,
        source: Run,
        index: int,
        branch: Branch,
        regenerates: bool = False,
        run_id: str | None = None,
    ) -> tuple[Run, list[Message], list[Message]]:
        """A new run (`run_id`, or a new id) at the source's whole boundary `index`, not
        written yet: the run, the rows it is born with (edited messages, its input), and
        its input. `regenerates`: it regenerates the source's final answer."""
        run_id = run_id or new_id()
        new = [Message(role="user", content=branch.input)] if branch.input is not None else []
        born = await edits.birth(self.storage, agent, source, index, branch.edits, run_id, new)
        run = Run(
            run_id=run_id,
            session_id=source.session_id,
            agent_id=source.agent_id,
            team_id=source.team_id,
            user_id=source.user_id,
            input=branch.input if branch.input is not None else source.input,
            model=branch.model or agent.model_name,
            policy=agent.checkpoint,
            segments=born.segments,
            message_count=born.message_count,
            previous_run_id=source.previous_run_id,
            forked_from_run_id=source.run_id,
            forked_from_message_index=index,
            regenerated_from=source.run_id if regenerates else None,
            edits=born.edits,
            instructions=branch.instructions,
            decisions=born.decisions,
        )
        return run, born.rows, new
