"""runpoint: LLM agent runs that can be checkpointed, inspected, resumed and forked."""

import pluggy

# The marker plugins implement hooks with (see runpoint.hookspecs).
hookimpl = pluggy.HookimplMarker("runpoint")

__all__ = ["hookimpl"]
