"""A checkpoint policy written against runpoint's public hooks only.

``every-n-turns`` marks a resume point after every N-th model turn that called tools
(N from the environment variable ``RUNPOINT_EVERY_N_TURNS``, default 2), and at the end.
"""

import os
from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.policy import Boundary, CheckpointPolicy


class EveryNTurns:
    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError("N must be at least 1")
        self.n = n

    def is_checkpoint(self, boundary: Boundary) -> bool:
        return boundary.kind == "end" or boundary.model_turns % self.n == 0


@hookimpl
def runpoint_checkpoint_policies() -> Mapping[str, CheckpointPolicy]:
    return {"every-n-turns": EveryNTurns(int(os.environ.get("RUNPOINT_EVERY_N_TURNS", "2")))}
