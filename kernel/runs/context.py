"""What every job of `runpoint.runs` works with, built once by the facade."""

from __future__ import annotations

from dataclasses import dataclass

from runpoint.durable.leases import Leases
from runpoint.reads.queries import Queries
from runpoint.seams.host import PluginHost
from runpoint.seams.storage import Storage
from runpoint.sessions.lifecycle import Sessions


@dataclass(frozen=True)
class RunContext:
    """The collaborators the executor, the continuation and the commands share (the
    executor, built from it, is handed beside it to those that start runs)."""

    storage: Storage
    host: PluginHost
    leases: Leases
    queries: Queries
    sessions: Sessions
