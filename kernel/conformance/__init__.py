"""The storage conformance suite: what every `runpoint.seams.storage.Storage` backend must do.

Each check is an async function, tagged with the capability it is about, that takes
fresh backends from a factory. A backend must have every required capability, and may
declare that it lacks an optional one (`Capability.optional`). In a pytest module::

    from runpoint.conformance import run

    async def test_my_storage_conforms() -> None:
        report = await run(lambda: MyStorage("mine://test"), skip={"processes"})
        assert report.ok, report

`print(report)` shows a table of what passed, failed and was skipped, by capability,
then each failure with the line that failed and why. See docs/plugins.md.
"""

# each module registers its checks when imported
from runpoint.conformance import (  # noqa: F401
    approvals,
    encryption,
    events,
    keys,
    long_runs,
    members,
    optional,
    retention,
    runs,
    schedules,
    session_checkpoints,
    sessions,
    transcripts,
)
from runpoint.conformance.suite import (
    CHECKS,
    BackendFactory,
    Capability,
    Check,
    Outcome,
    Report,
    run,
)

__all__ = ["CHECKS", "BackendFactory", "Capability", "Check", "Outcome", "Report", "run"]
