"""Sessions: create, look one up (its team's only), list, rename, delete, and settle a
session's lock.

A rollback locks its session while it goes and holds a lease (`runpoint.durable.leases`). There
is no sweep for a rollback whose process died (nothing indexes them): the next request
that meets its lock completes it, from its first step (restores are idempotent). This
module also lays a session's runs out again as copy-on-write forks (`fork_runs`), which
rollback (in the same session) and forks (in new sessions) both do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import msgspec

from runpoint.core import tenancy, transcript
from runpoint.core.errors import Conflict, Locked, NotFound
from runpoint.core.types import (
    Approval,
    ApprovalQuery,
    Lease,
    Rollback,
    Run,
    RunStatus,
    Segment,
    Session,
    SessionCapture,
    new_id,
    now,
)
from runpoint.durable.leases import Leases
from runpoint.seams.crew import member_run_id
from runpoint.seams.host import PluginHost
from runpoint.seams.session_state import SessionState
from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.sessions")
T = TypeVar("T")
# a paused run's approvals looked at for its pause's: the newest first, those of later
# pauses (made after a capture) among them
PAUSES_LOOKED_AT = 20


async def restore(name: str, state: SessionState, session_id: str, captured: bytes) -> None:
    """Restore plugin `name`'s capture into `session_id`; its refusal is a Conflict that
    says which plugin refused and why (a client can act on it, unlike a bare 500)."""
    try:
        await state.restore(session_id, captured)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise Conflict(f"state {name!r} could not be restored: {why}") from exc


def forked_session(source: Session, event_seq: int) -> Session:
    """A new session that starts where `source` was at `event_seq` of its event log (its
    runs are `fork_runs` of the source's)."""
    return Session(
        session_id=new_id(),
        agent_id=source.agent_id,
        team_id=source.team_id,
        user_id=source.user_id,
        forked_from_session_id=source.session_id,
        event_seq=event_seq,
    )


async def with_members(storage: Storage, runs: Sequence[Run]) -> list[Run]:
    """A session's runs, then their member runs (a crew run's tree): what a fork or a
    capture of the session copies."""
    return [*runs, *[m for run in runs for m in await storage.member_runs(run.run_id)]]


def fork_runs(runs: Sequence[Run], session_id: str) -> list[Run]:
    """Copies of a session's runs (oldest first, then their member runs: `with_members`)
    in `session_id`: each a fork of its source cut at the source's `message_count`,
    pointing at its rows (copy-on-write); the lineage between them points at the copies,
    and a member run's copy has the id its crew run's copy's delegation looks up."""
    renamed: dict[str, str] = {}
    for run in runs:
        parent = renamed.get(run.parent_run_id or "")
        renamed[run.run_id] = (
            new_id() if parent is None else member_run_id(parent, run.parent_tool_call_id or "")
        )
    return [
        msgspec.structs.replace(
            run,
            run_id=renamed[run.run_id],
            session_id=session_id,
            segments=[
                *transcript.cut(run.segments, run.message_count),
                Segment(renamed[run.run_id], run.message_count),
            ],
            previous_run_id=renamed.get(run.previous_run_id or ""),
            parent_run_id=renamed.get(run.parent_run_id or ""),
            forked_from_run_id=run.run_id,
            forked_from_message_index=run.message_count,
            forked_from_session_id=run.session_id,
            hidden=False,
            created_at=now(),
            updated_at=now(),
        )
        for run in runs
    ]


async def writing_copies(
    storage: Storage,
    host: PluginHost,
    sources: Sequence[Run],
    copies: Sequence[Run],
    write: Callable[[], Awaitable[T]],
) -> T:
    """`write()` of `copies` (`fork_runs` of `sources`, pairwise), with the approval of each
    paused copy: its source's of the pause it was copied in (the newest made by the time the
    source was last written, which a pause's save is), pending again for the copy
    (`Approval.copied`), so that the fork's (or rollback's) paused run is in the inbox and
    decided apart from its source. Written before the copies, as a pause writes its
    approval first: a copy that was written has its approval; a write that failed leaves
    approvals of no run, which the approvals sweep settles. Announced once the copies are."""
    approvals: list[tuple[Approval, Run]] = []
    for source, copy in zip(sources, copies, strict=True):
        if copy.status != RunStatus.PAUSED:
            continue
        query = ApprovalQuery(team_id=source.team_id, run_id=source.run_id)
        found, _ = await storage.list_approvals(query, limit=PAUSES_LOOKED_AT, offset=0)
        if made := [a for a in found if a.created_at <= source.updated_at]:
            approvals.append((made[0].copied(copy), copy))
    for approval, _ in approvals:
        await storage.add_approval(approval)
    written = await write()
    for approval, copy in approvals:
        host.hook.runpoint_approval_requested(approval=approval, run=copy)
    return written


class Sessions:
    def __init__(self, storage: Storage, host: PluginHost, leases: Leases) -> None:
        self.storage = storage
        self.host = host
        self.leases = leases

    async def get(self, session_id: str) -> Session:
        """The session: NotFound, or Forbidden if it is another team's."""
        session = await self.storage.get_session(session_id)
        if session is None:
            raise NotFound(f"session {session_id} not found")
        tenancy.check(session.team_id, "session", session_id)
        return session

    async def usable(self, session_id: str) -> Session:
        """The session, if it takes requests: as `get`, and Locked while it is locked."""
        session = await self.get(session_id)
        if session.locked is not None:
            await self.settle_lock(session)
            return await self.usable(session_id)
        return session

    async def list_sessions(self, *, limit: int = 100, offset: int = 0) -> list[Session]:
        """The sessions of the current principal's team, newest first."""
        team = tenancy.current().team
        return await self.storage.list_sessions(team_id=team, limit=limit, offset=offset)

    async def create(self, session: Session) -> Session:
        """A new session of the current principal's team with no run yet (the first run
        that names it joins it); Conflict if its id is the team's already, and, like any
        other team's session, Forbidden if it is another team's."""
        session = msgspec.structs.replace(session, team_id=tenancy.current().team)
        try:
            await self.storage.create_sessions([session])
        except Conflict:
            await self.get(session.session_id)
            raise
        return session

    async def rename(self, session_id: str, name: str | None) -> Session:
        await self.get(session_id)
        if not await self.storage.rename_session(session_id, name):
            raise NotFound(f"session {session_id} not found")
        return await self.get(session_id)

    async def names(self, sessions: Sequence[Session]) -> dict[str, str]:
        """Each session's name as AgentOS gives it: its own, else its first input ("" before
        any run), by session id; one read for them all."""
        unnamed = [s.session_id for s in sessions if s.session_name is None]
        firsts = await self.storage.first_inputs(unnamed) if unnamed else {}
        return {
            s.session_id: s.session_name
            if s.session_name is not None
            else firsts.get(s.session_id) or ""
            for s in sessions
        }

    async def delete(self, session_ids: Sequence[str]) -> None:
        """Delete these sessions (the team's) with their runs, all or none."""
        for session_id in session_ids:
            await self.get(session_id)
        if not await self.storage.delete_sessions(session_ids):
            raise NotFound(f"session {', '.join(session_ids)} not found")

    async def settle_lock(self, session: Session) -> None:
        """Locked for a locked session, unless its lock is a rollback's whose process died
        (its lease ran out): then this process takes it over and completes it (restore
        the capture again, then the rows, which unlock), or, if its checkpoint is gone,
        unlocks the session as its rows say. Read the session and its runs again after."""
        rollback, reason = session.rollback, session.locked
        if reason is None:
            return
        if reason != "rollback" or rollback is None or not rollback.lease.ran_out():
            raise Locked.session(reason)
        capture = await self.storage.session_capture(rollback.checkpoint_id)
        states = {} if capture is None else self.states(rollback.checkpoint_id, capture)
        taken = Rollback(rollback.checkpoint_id, self.leases.lease())
        if not await self.storage.hold_rollback(session.session_id, taken):
            return  # another process took it over (or completed it) first
        log.info("completing the rollback of session %s: its process was lost", session.session_id)
        if capture is None:
            await self.storage.unlock_session(session.session_id, taken.lease.owner)
            return
        try:
            await self.roll_back(session.session_id, taken, capture, states)
        except Exception:  # a plugin refused: not this request's failure (it is unlocked)
            log.exception("the rollback of session %s failed", session.session_id)

    async def roll_back(
        self,
        session_id: str,
        rollback: Rollback,
        capture: SessionCapture,
        states: dict[str, SessionState],
    ) -> None:
        """Restore every plugin's state, then the rows, which unlock the session, under the
        rollback's lease. Each step done again is the same step, so a process that takes
        over a rollback whose process died does them all again. A plugin's refusal unlocks
        the session; a cancellation leaves it to be taken over once its lease runs out."""
        owner = rollback.lease.owner

        def renew(lease: Lease) -> Awaitable[bool]:
            return self.storage.hold_rollback(
                session_id, msgspec.structs.replace(rollback, lease=lease)
            )

        try:
            async with self.leases.renewing(owner, renew):
                for name, state in states.items():
                    await restore(name, state, session_id, capture.states[name])
                # False if this process was too slow and another took the rollback over
                copies = fork_runs(capture.runs, session_id)
                await writing_copies(
                    self.storage,
                    self.host,
                    capture.runs,
                    copies,
                    lambda: self.storage.rollback_session(session_id, copies, owner),
                )
        except Exception:
            await self.storage.unlock_session(session_id, owner)
            raise

    def states(self, checkpoint_id: str, capture: SessionCapture) -> dict[str, SessionState]:
        """The plugins that restore a capture; Conflict if one of them is not loaded."""
        states = self.host.session_states()
        if missing := sorted(capture.states.keys() - states.keys()):
            raise Conflict(
                f"checkpoint {checkpoint_id} holds state of plugins not loaded: {missing}"
            )
        return {n: s for n, s in states.items() if n in capture.states}
