"""The facade's sessions: create, read, rename, delete and fork them."""

from __future__ import annotations

from collections.abc import Sequence

from runpoint.core.types import Session, new_id
from runpoint.reads.queries import Queries
from runpoint.runs.commands import Commands, ForkSession
from runpoint.sessions.lifecycle import Sessions


class SessionsFacade:
    """Half of `runpoint.facade.Runpoint`, which sets these."""

    queries: Queries
    sessions: Sessions
    commands: Commands

    async def create_session(
        self,
        agent_id: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        session_name: str | None = None,
    ) -> Session:
        """A new session of `agent_id`, empty until a run names it; Conflict if
        `session_id` is taken (a new id when None)."""
        self.queries.agent(agent_id)
        session = Session(
            session_id=session_id or new_id(),
            agent_id=agent_id,
            user_id=user_id,
            session_name=session_name,
        )
        return await self.sessions.create(session)

    async def get_session(self, session_id: str) -> Session:
        return await self.sessions.get(session_id)

    async def rename_session(self, session_id: str, session_name: str | None) -> Session:
        """Give the session a name (None: take its name away)."""
        return await self.sessions.rename(session_id, session_name)

    async def list_sessions(self, *, limit: int = 100, offset: int = 0) -> list[Session]:
        """The sessions of the current principal's team, newest first."""
        return await self.sessions.list_sessions(limit=limit, offset=offset)

    async def session_names(self, sessions: Sequence[Session]) -> dict[str, str]:
        return await self.sessions.names(sessions)

    async def delete_session(self, session_id: str) -> None:
        await self.sessions.delete([session_id])

    async def delete_sessions(self, session_ids: Sequence[str]) -> None:
        """Delete these sessions with their runs, all or none (NotFound, Conflict)."""
        await self.sessions.delete(list(dict.fromkeys(session_ids)))

    async def fork_session(
        self, request: ForkSession, *, idempotency_key: str | None = None
    ) -> Session:
        """A new session with the same history; its runs point at the source's rows."""
        return await self.commands.fork_session(request, idempotency_key=idempotency_key)
