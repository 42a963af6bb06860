"""Every built-in backend passes the storage conformance suite."""

from __future__ import annotations

from runpoint.conformance import run
from runpoint.seams.host import PluginHost


async def test_the_memory_backend_conforms() -> None:
    host = PluginHost()
    # each `memory:` backend is a store of its own: none shares it with another
    report = await run(lambda: host.storage("memory:"), skip={"processes"})
    assert report.ok, report


async def test_the_sql_backends_conform(database: str) -> None:
    host = PluginHost()
    report = await run(lambda: host.storage(database))
    assert report.ok and not report.skipped, report
