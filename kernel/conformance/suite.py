"""The checks' registry, the runner and its report."""

from __future__ import annotations

import asyncio
import enum
import traceback
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runpoint.conformance.recording import Recording
from runpoint.core.keyring import Keyring
from runpoint.seams.storage import Encrypted, Storage

# Builds a new, unopened backend. Backends it builds may share their data (each check
# uses fresh ids); for the `processes` capability they must.
BackendFactory = Callable[[], Storage]
CheckFunction = Callable[..., Awaitable[None]]
Result = Literal["passed", "failed", "skipped"]
_HERE = Path(__file__).parent  # where the checks are, to say which line failed
CHECK_SECONDS = 30  # a check that takes longer (a deadlock, say) fails


class Capability(enum.StrEnum):
    """What a group of checks is about. A backend may declare it lacks an optional one."""

    RUNS = "runs"
    TRANSCRIPTS = "transcripts"
    EVENTS = "events"
    CHECKPOINTS = "checkpoints"
    TOOL_RECORDS = "tool_records"
    LEASES = "leases"
    SESSIONS = "sessions"
    LOCKS = "locks"
    ROLLBACK = "rollback"
    SESSION_CHECKPOINTS = "session_checkpoints"
    IDEMPOTENCY = "idempotency"
    RETENTION = "retention"
    SCHEDULES = "schedules"
    # optional: several backends (processes) sharing one store (so every check of more
    # than one backend); text with U+0000 (NUL); encryption at rest (`Encrypted`), each
    # backend given a codec with a keyring of its own
    PROCESSES = "processes"
    NUL = "nul"
    ENCRYPTION = "encryption"

    @property
    def optional(self) -> bool:
        return self in (Capability.PROCESSES, Capability.NUL, Capability.ENCRYPTION)


@dataclass(frozen=True)
class Check:
    name: str
    capability: Capability
    function: CheckFunction
    # how many backends it takes from the factory (two: they share one store)
    backends: int = 1


CHECKS: list[Check] = []


def check(capability: Capability, *, backends: int = 1) -> Callable[[CheckFunction], CheckFunction]:
    """Register an async function as a check of `capability`; its name is the check's."""

    def register(function: CheckFunction) -> CheckFunction:
        CHECKS.append(Check(function.__name__, capability, function, backends))
        return function

    return register


@dataclass(frozen=True)
class Outcome:
    check: Check
    result: Result
    message: str = ""


@dataclass(frozen=True, repr=False)
class Report:
    outcomes: tuple[Outcome, ...]

    def names(self, result: Result) -> set[str]:
        return {o.check.name for o in self.outcomes if o.result == result}

    @property
    def passed(self) -> set[str]:
        return self.names("passed")

    @property
    def failed(self) -> set[str]:
        return self.names("failed")

    @property
    def skipped(self) -> set[str]:
        return self.names("skipped")

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        """One line per capability, a total, then each failure with its message."""
        lines = [f"{'capability':<22}{'passed':>8}{'failed':>8}{'skipped':>9}"]
        for capability in [*Capability, None]:
            counted = [o for o in self.outcomes if capability in (None, o.check.capability)]
            counts = [sum(o.result == r for o in counted) for r in ("passed", "failed", "skipped")]
            label = "total" if capability is None else capability.value
            lines.append(f"{label:<22}{counts[0]:>8}{counts[1]:>8}{counts[2]:>9}")
        lines += [
            f"FAILED {o.check.capability}/{o.check.name}: {o.message}"
            for o in self.outcomes
            if o.result == "failed"
        ]
        return "\n".join(lines)

    # what pytest shows of `assert report.ok, report`
    __repr__ = __str__


async def run(factory: BackendFactory, *, skip: Collection[str] = ()) -> Report:
    """Run every check on fresh backends from `factory`, but those of the optional
    capabilities in `skip`."""
    skipped = {Capability(name) for name in skip}
    if required := sorted(c for c in skipped if not c.optional):
        raise ValueError(f"a backend must have every required capability: {required}")
    outcomes = []
    # the encryption checks last: the rows they seal are under keys the others lack
    for one in sorted(CHECKS, key=lambda c: c.capability is Capability.ENCRYPTION):
        # two backends of a check share one store: a backend that cannot lacks `processes`
        if one.capability in skipped or (one.backends > 1 and Capability.PROCESSES in skipped):
            outcomes.append(Outcome(one, "skipped"))
        else:
            outcomes.append(await _run_check(one, factory))
    return Report(tuple(outcomes))


async def _run_check(one: Check, factory: BackendFactory) -> Outcome:
    backends = [factory() for _ in range(one.backends)]
    try:
        async with asyncio.timeout(CHECK_SECONDS):
            for n, backend in enumerate(backends):
                if one.capability is Capability.ENCRYPTION:
                    encrypted(backend, n)
                await backend.open()
            await one.function(*backends)
    except Exception as error:
        return Outcome(one, "failed", _describe(error))
    finally:
        for backend in backends:
            await backend.close()
    return Outcome(one, "passed")


def encrypted(backend: Storage, n: int) -> None:
    """Give the `n`th backend of an encryption check its codec (`Recording`), with a
    keyring of its own."""
    if not isinstance(backend, Encrypted):
        raise AssertionError("the backend does not implement runpoint.seams.storage.Encrypted")
    backend.encrypt_with(Recording(Keyring({f"key-{n}": bytes([n + 1]) * 32})))


def _describe(error: Exception) -> str:
    """Where a check failed (the statement that raised, in the check's own module) and
    why: an assertion's message, or any other error with its type."""
    ours = [
        f for f in traceback.extract_tb(error.__traceback__) if Path(f.filename).parent == _HERE
    ]
    where = f"{Path(ours[-1].filename).stem}:{ours[-1].lineno} {ours[-1].line}: " if ours else ""
    if isinstance(error, AssertionError):
        return where + (str(error) or "assertion failed")
    return f"{where}{type(error).__name__}: {error}"
