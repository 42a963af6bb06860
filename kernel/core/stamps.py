"""What records are stamped with: new ids, the time, and how long something took."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import msgspec


def new_id() -> str:
    return str(uuid.uuid4())


def now() -> float:
    return time.time()


class Timing(msgspec.Struct, frozen=True):
    """When something started (epoch seconds) and how long it took (seconds, measured by
    a monotonic clock, so that a clock set back or forward meanwhile changes nothing)."""

    started_at: float
    seconds: float


def stopwatch() -> Callable[[], Timing]:
    """Started now: each call gives the time from then to the call."""
    started_at, start = now(), time.perf_counter()
    return lambda: Timing(started_at, time.perf_counter() - start)
