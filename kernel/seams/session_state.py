"""The state-capture seam: state a plugin keeps outside runpoint (a sandbox's files, say)
that session checkpoints capture, and rollback and fork restore."""

from __future__ import annotations

from typing import Protocol


class SessionState(Protocol):
    async def capture(self, session_id: str) -> bytes:
        """The session's state now. Raising makes the checkpoint FAILED."""

    async def restore(self, session_id: str, state: bytes) -> None:
        """Make `state` (a capture's) the state of `session_id`: the same session on
        rollback, a new one on fork. All or nothing: raising must leave the session's
        state as it was."""

    async def discard(self, session_id: str) -> None:
        """Forget a new session's state: a fork that failed leaves nothing behind."""
