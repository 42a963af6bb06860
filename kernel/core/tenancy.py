"""Teams: every session belongs to one, and only its principals see it and its runs.

The principal a request acts as is ambient (a context variable the adapter sets once per
request), so every service that looks a session or run up checks it the same way, and
code that calls the services from Python acts as `OPEN`: the default team, every scope.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import msgspec

from runpoint.core.errors import Forbidden

DEFAULT_TEAM = "default"
READ, WRITE = "read", "write"  # reading anything, changing anything


class Principal(msgspec.Struct, frozen=True):
    team: str
    user: str | None = None
    scopes: frozenset[str] = frozenset({READ, WRITE})


OPEN = Principal(DEFAULT_TEAM)
_current: ContextVar[Principal] = ContextVar("runpoint_principal", default=OPEN)


def current() -> Principal:
    return _current.get()


@contextlib.contextmanager
def acting_as(principal: Principal) -> Iterator[Principal]:
    token = _current.set(principal)
    try:
        yield principal
    finally:
        _current.reset(token)


def check(team_id: str, kind: str, id_: str) -> None:
    """The one tenancy rule: a session, and each of its runs, is its team's alone."""
    if team_id != current().team:
        raise Forbidden(kind, id_)
