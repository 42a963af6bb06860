"""runpoint: LLM agent runs that can be checkpointed, inspected, resumed and forked."""

import pluggy

# The two markers of the plugin API (the tox 4 layout): plugins implement hooks with
# `hookimpl`; runpoint.hookspecs declares them with `hookspec`. Only this module and
# runpoint.host import pluggy.
hookimpl = pluggy.HookimplMarker("runpoint")
hookspec = pluggy.HookspecMarker("runpoint")

__all__ = ["hookimpl", "hookspec"]
