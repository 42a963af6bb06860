"""Session checkpoints: captures of a whole session at its event-log cursor, which seed
rollback (the session returns to one, in place) and forks (new sessions start at one).

A capture holds the session's live runs as they were (each run's `message_count` is its
cut: no message is copied) and what state-capture plugins add. Rollback and fork both lay
the captured runs out again as copy-on-write forks (`runpoint.sessions.lifecycle.fork_runs`):
rollback in the same session, whose earlier runs it hides but keeps; fork in new sessions.

A capture and a rollback each hold a lease while they go (`runpoint.durable.leases`). There is
no sweep for the ones whose process died (nothing indexes them): the next request that
meets one settles it. A capture cut short ends FAILED; a rollback cut short is done again
(see `Sessions.settle_lock`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Literal

import msgspec

from runpoint.core.errors import Conflict, InvalidRequest, NotFound
from runpoint.core.types import (
    IN_FLIGHT,
    Lease,
    Rollback,
    Run,
    Session,
    SessionCapture,
    SessionCheckpoint,
    SessionCheckpointStatus,
    new_id,
)
from runpoint.durable.leases import Leases
from runpoint.seams.host import PluginHost
from runpoint.seams.session_state import SessionState
from runpoint.seams.storage import Storage
from runpoint.sessions.lifecycle import (
    Sessions,
    fork_runs,
    forked_session,
    restore,
    with_members,
    writing_copies,
)

MAX_FORKS = 4
ABANDONED = "its process stopped during the capture"
_encode = msgspec.json.Encoder().encode


class SessionCheckpoints:
    def __init__(
        self, storage: Storage, host: PluginHost, leases: Leases, sessions: Sessions
    ) -> None:
        self.storage = storage
        self.host = host
        self.leases = leases
        self.sessions = sessions

    async def create(
        self,
        session_id: str,
        *,
        label: str | None = None,
        kind: Literal["explicit", "auto"] = "explicit",
    ) -> SessionCheckpoint:
        """Capture the session now; READY, or FAILED (with why) if a plugin's capture
        raised. Conflict while a run of it is in flight."""
        session = await self.sessions.usable(session_id)
        runs = await with_members(self.storage, await self.storage.list_runs(session_id))
        if busy := [r.run_id for r in runs if r.status in IN_FLIGHT]:
            raise Conflict(f"session {session_id} has runs in flight: {', '.join(busy)}")
        latest = await self.sessions.usable(session_id)
        if latest.event_seq != session.event_seq:
            raise Conflict(f"session {session_id} changed while it was read; try again")
        lease = self.leases.lease()
        checkpoint = SessionCheckpoint(
            checkpoint_id=new_id(),
            session_id=session_id,
            event_seq=session.event_seq,
            kind=kind,
            label=label,
            lease=lease,
        )
        await self.storage.add_session_checkpoint(checkpoint)

        def renew(renewed: Lease) -> Awaitable[bool]:
            pending = msgspec.structs.replace(checkpoint, lease=renewed)
            return self.storage.update_session_checkpoint(pending, None, lease.owner)

        async with self.leases.renewing(lease.owner, renew):
            finished, capture = await self._capture(checkpoint, session, runs)
        if not await self.storage.update_session_checkpoint(finished, capture, lease.owner):
            # too slow: another process took it for dead, and ended it FAILED
            return await self.get(session_id, checkpoint.checkpoint_id)
        return finished

    async def _capture(
        self, checkpoint: SessionCheckpoint, session: Session, runs: list[Run]
    ) -> tuple[SessionCheckpoint, bytes | None]:
        """The checkpoint READY with its encoded capture, or FAILED if a plugin's capture
        raised."""
        done = msgspec.structs.replace(checkpoint, lease=None)
        states: dict[str, bytes] = {}
        for name, state in self.host.session_states().items():
            try:
                states[name] = await state.capture(session.session_id)
            except Exception as exc:  # the plugin's failure is the checkpoint's, not ours
                message = f"state {name!r} could not be captured: {type(exc).__name__}: {exc}"
                failed = SessionCheckpointStatus.FAILED
                return msgspec.structs.replace(done, status=failed, error_message=message), None
        capture = _encode(SessionCapture(session, runs, states))
        ready = SessionCheckpointStatus.READY
        return msgspec.structs.replace(done, status=ready, size_bytes=len(capture)), capture

    async def _settled(self, checkpoint: SessionCheckpoint) -> SessionCheckpoint:
        """The checkpoint, ended FAILED first if its capture's process died (its lease ran
        out: a PENDING one without a lease is from before leases, as dead)."""
        lease = checkpoint.lease
        if checkpoint.status is not SessionCheckpointStatus.PENDING or (
            lease is not None and not lease.ran_out()
        ):
            return checkpoint
        failed = msgspec.structs.replace(
            checkpoint, status=SessionCheckpointStatus.FAILED, lease=None, error_message=ABANDONED
        )
        if await self.storage.update_session_checkpoint(failed, None, None):
            return failed
        # it ended meanwhile (another process settled it, or its own finished it)
        return await self.storage.get_session_checkpoint(checkpoint.checkpoint_id) or failed

    async def page(
        self, session_id: str, *, page_size: int, before: int | None = None
    ) -> tuple[list[SessionCheckpoint], int | None]:
        """A page of the session's checkpoints, newest first, from `before` (a position the
        previous page gave) on, and where the next page starts (None: this is the last)."""
        await self.sessions.usable(session_id)
        found = await self.storage.list_session_checkpoints(
            session_id, limit=page_size + 1, before=before
        )
        page = found[:page_size]
        next_page = page[-1][0] if len(found) > page_size else None
        return [await self._settled(checkpoint) for _, checkpoint in page], next_page

    async def get(self, session_id: str, checkpoint_id: str) -> SessionCheckpoint:
        await self.sessions.usable(session_id)
        checkpoint = await self.storage.get_session_checkpoint(checkpoint_id)
        if checkpoint is None or checkpoint.session_id != session_id:
            raise NotFound(f"checkpoint {checkpoint_id} of session {session_id} not found")
        return await self._settled(checkpoint)

    async def delete(self, session_id: str, checkpoint_id: str) -> None:
        """Delete a checkpoint; deleting one that is gone already is not an error."""
        await self.sessions.usable(session_id)
        checkpoint = await self.storage.get_session_checkpoint(checkpoint_id)
        if checkpoint is not None and checkpoint.session_id == session_id:
            await self.storage.delete_session_checkpoint(checkpoint_id)

    async def rollback(self, session_id: str, checkpoint_id: str) -> SessionCheckpoint:
        """Return the session to a READY checkpoint, in place. Its runs since are hidden
        from it but kept (readable by id). Conflict if a run of it is in flight; while
        the rollback goes on, the session is locked (Locked to everyone else)."""
        checkpoint, capture, states = await self._seed(session_id, checkpoint_id)
        rollback = Rollback(checkpoint_id, self.leases.lease())
        if not await self.storage.lock_session(session_id, "rollback", rollback):
            raise NotFound(f"session {session_id} not found")
        await self.sessions.roll_back(session_id, rollback, capture, states)
        return checkpoint

    async def fork(
        self, session_id: str, *, from_checkpoint_id: str | None = None, count: int = 1
    ) -> tuple[SessionCheckpoint, list[Session]]:
        """`count` new sessions at a READY checkpoint (one taken now if none is named),
        all or nothing: a failure leaves no session, run or plugin state behind (nor the
        checkpoint taken for the fork)."""
        if not 1 <= count <= MAX_FORKS:
            raise InvalidRequest(f"count must be 1 to {MAX_FORKS}, not {count}")
        taken = None
        if from_checkpoint_id is None:
            taken = await self.create(session_id)
            if taken.status is not SessionCheckpointStatus.READY:
                await self.storage.delete_session_checkpoint(taken.checkpoint_id)
                raise Conflict(f"the session could not be captured: {taken.error_message}")
            from_checkpoint_id = taken.checkpoint_id
        restored: list[tuple[SessionState, str]] = []
        try:
            checkpoint, capture, states = await self._seed(session_id, from_checkpoint_id)
            forks = [forked_session(capture.session, checkpoint.event_seq) for _ in range(count)]
            for fork in forks:
                for name, state in states.items():
                    await restore(name, state, fork.session_id, capture.states[name])
                    restored.append((state, fork.session_id))
            runs = [run for fork in forks for run in fork_runs(capture.runs, fork.session_id)]
            await writing_copies(
                self.storage,
                self.host,
                capture.runs * len(forks),
                runs,
                lambda: self.storage.create_sessions(forks, runs),
            )
        except BaseException:
            for state, fork_id in restored:
                await state.discard(fork_id)
            if taken is not None:
                await self.storage.delete_session_checkpoint(taken.checkpoint_id)
            raise
        return checkpoint, forks

    async def _seed(
        self, session_id: str, checkpoint_id: str
    ) -> tuple[SessionCheckpoint, SessionCapture, dict[str, SessionState]]:
        """A READY checkpoint of the session, its capture, and the plugins to restore it."""
        checkpoint = await self.get(session_id, checkpoint_id)
        capture = await self.storage.session_capture(checkpoint_id)
        if checkpoint.status is not SessionCheckpointStatus.READY or capture is None:
            raise Conflict(f"checkpoint {checkpoint_id} is {checkpoint.status}, not READY")
        return checkpoint, capture, self.sessions.states(checkpoint_id, capture)
