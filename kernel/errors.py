"""Typed errors the services raise; adapters map each to a status code."""

from __future__ import annotations


class RunpointError(Exception):
    """Base of every error a client can cause."""


class NotFound(RunpointError):
    """An agent, session, run or checkpoint that does not exist (404)."""


class InvalidBoundary(RunpointError):
    """A message index or `continue_from` outside the run, or not a boundary (400)."""


class NotContinuable(RunpointError):
    """The run is in no state to continue the way it was asked to (409)."""


class Conflict(RunpointError):
    """The request collides with work in flight (409)."""


class InvalidRequest(RunpointError):
    """A request that is well-formed but makes no sense (400)."""


class InvalidArguments(RunpointError):
    """Tool arguments a person wrote (an edit) that the tool's schema refuses; the message
    names the field (422, as any input that does not fit its schema)."""


class ConfigurationError(RunpointError):
    """An agent or plugin set up wrongly: unknown model, policy or storage."""


class Locked(RunpointError):
    """A session locked for maintenance, or being rolled back (423)."""

    @classmethod
    def session(cls, reason: str) -> Locked:
        return cls(f"This session is unavailable ({reason})")


class Forbidden(RunpointError):
    """A session, or a run of a session, that belongs to another team. Each adapter decides
    what the caller learns: that it is another team's, or that there is no such `kind`
    (a "session" or a "run") with this `id`."""

    def __init__(self, kind: str, id_: str) -> None:
        super().__init__(f"{kind} {id_} belongs to another team")
        self.kind = kind
        self.id = id_
