"""Every built-in backend passes the storage conformance suite."""

from __future__ import annotations

from runpoint.conformance import run
from runpoint.host import PluginHost

# Checks the SQL backend fails as it stands (it is being rewritten for issue 13). Strict:
# once one passes, this test fails until it is taken off the list.
KNOWN_SQL_DEVIATIONS = {
    # it takes LIMIT 20 expired runs, then filters them by agent (issue 13, item 8)
    "expired_runs_are_those_of_the_agents_asked_even_among_many_others",
    # an inserted run's `recoveries` is not written: the column keeps its default, 0
    "a_run_reads_back_as_it_was_inserted",
}


async def test_the_memory_backend_conforms() -> None:
    host = PluginHost()
    # each `memory:` backend is a store of its own: none shares it with another
    report = await run(lambda: host.storage("memory:"), skip={"processes"})
    assert report.ok, report


async def test_the_sql_backends_conform(database: str) -> None:
    host = PluginHost()
    report = await run(lambda: host.storage(database))
    assert report.failed == KNOWN_SQL_DEVIATIONS, f"fixed? take it off the list\n{report}"
    assert not report.skipped
