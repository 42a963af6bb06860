"""What a test that outlives pytest-timeout's limit was waiting for.

pytest-timeout's thread method dumps the threads' stacks and ends the process, but under
xdist a worker's terminal is not shown, and a hung asyncio test's main thread is only the
event loop idling in its selector. This timer writes, to the stderr the controller shows,
every thread's stack and every pending task's stack of each running event loop (what was
awaited and never completed), then lets pytest-timeout end the worker as before.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import sys
import threading
from typing import Any

import pytest
import pytest_timeout


def _dump(item: pytest.Item, settings: Any) -> None:
    capture = item.config.pluginmanager.getplugin("capturemanager")
    if capture:  # fd 2 is pytest's capture file until then
        capture.suspend_global_capture(item)
    out = sys.__stderr__
    assert out is not None
    print(f"\n+++ {item.nodeid} ran past {settings.timeout} s +++", file=out)
    faulthandler.dump_traceback(file=out, all_threads=True)
    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)]
    for loop in loops:
        if loop.is_running():
            for task in asyncio.all_tasks(loop):
                print(f"--- {task!r}", file=out)
                task.print_stack(file=out)
    out.flush()
    pytest_timeout.timeout_timer(item, settings)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool:
    timer = threading.Timer(settings.timeout, _dump, (item, settings))
    timer.daemon = True

    def cancel() -> None:
        timer.cancel()
        timer.join()

    item.cancel_timeout = cancel  # type: ignore[attr-defined]  # pytest-timeout's name
    timer.start()
    return True
