"""The built-in checkpoint policies (they take no options)."""

from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.seams.policy import Boundary, CheckpointPolicyFactory


class ToolBatchPolicy:
    """A resume point after every batch of tool calls, and where the run stops."""

    def is_checkpoint(self, boundary: Boundary) -> bool:
        return True


class RunsPolicy:
    """A resume point only where the run stops."""

    def is_checkpoint(self, boundary: Boundary) -> bool:
        return boundary.kind == "end"


@hookimpl
def runpoint_checkpoint_policies() -> Mapping[str, CheckpointPolicyFactory]:
    return {"tool-batch": ToolBatchPolicy, "runs": RunsPolicy}
