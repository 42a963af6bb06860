"""Typed errors the services raise; adapters map each to a status code."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


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


class MissingExtra(ConfigurationError):
    """Something asked for (a vendor's models, PostgreSQL) whose packages are not
    installed: the message is the pip command that installs them."""


@contextlib.contextmanager
def needs_extra(extra: str, what: str, *modules: str) -> Iterator[None]:
    """Imports made inside are runpoint's `extra`'s (its packages `modules`): one missing
    is a MissingExtra naming the command that installs it."""
    try:
        yield
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] not in modules:
            raise
        raise MissingExtra(
            f"{what} needs {exc.name}, which is not installed: pip install 'runpoint[{extra}]'"
        ) from exc


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


class Unavailable(RunpointError):
    """The database cannot be reached (down, restarting, its connections cut), or cannot
    write (`StorageFull`): nothing is wrong with the request, which may be sent again after
    `retry_after` seconds (503). A process retries its own writes that meet it."""

    retry_after = 2


class StorageFull(Unavailable):
    """A write failed for lack of space where the database keeps its files (507); reads
    go on, and writes resume once space is freed."""

    retry_after = 30


class ClaimLost(Exception):
    """A write was to answer an Idempotency-Key whose claim is its request's no longer (the
    claim's lease ran out and a retry took the key over): nothing was written. No client
    sees it: `runpoint.durable.idempotency` gives the request the retry's answer."""


class Unreadable(RunpointError):
    """A stored row that an encrypted database cannot serve as valid: in the clear, sealed
    under a key the keyring lacks, or failing authentication (altered, or copied from
    another row). The message names the row by its ids and what failed, never its
    content; the other rows still serve (500, INTEGRITY_ERROR)."""

    def __init__(self, row: str, reason: str) -> None:
        super().__init__(f"stored row {row} cannot be read: {reason}")
        self.row = row
        self.reason = reason
