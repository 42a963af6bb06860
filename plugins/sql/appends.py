"""Event appends of a process's runs, written together (runpoint/group_commit.py): appends
that come while one is being written go in the next write (one statement on PostgreSQL, one
transaction on SQLite), a group commit across runs. Each run's own log already gathers its
events while its last write goes (kernel/event_log.py); this gathers the runs' writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from runpoint.core.types import Run


class Append(NamedTuple):
    """Event rows (seq, document) for `run`, written only while its revision is the run's."""

    run: Run
    events: Sequence[tuple[int, bytes]]
