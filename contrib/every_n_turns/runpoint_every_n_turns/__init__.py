"""A checkpoint policy written against runpoint's public hooks only.

``every-n-turns`` marks a resume point after every N-th model turn that called tools, and
at the end. N is the agent's option ``n`` (default 2)::

    Agent(..., checkpoint="every-n-turns", checkpoint_options={"n": 3})
"""

from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.seams.policy import Boundary, CheckpointPolicyFactory


class EveryNTurns:
    def __init__(self, n: int = 2) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be a whole number of at least 1, not {n!r}")
        self.n = n

    def is_checkpoint(self, boundary: Boundary) -> bool:
        return boundary.kind == "end" or boundary.model_turns % self.n == 0


@hookimpl
def runpoint_checkpoint_policies() -> Mapping[str, CheckpointPolicyFactory]:
    return {"every-n-turns": EveryNTurns}
