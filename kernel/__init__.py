"""runpoint: LLM agent runs that can be checkpointed, inspected, resumed and forked."""

import importlib
import sys
import warnings
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_loader
from types import ModuleType
from typing import Any

import pluggy

# The two markers of the plugin API (the tox 4 layout): plugins implement hooks with
# `hookimpl`; runpoint.seams.hookspecs declares them with `hookspec`. Only this module and
# runpoint.seams.host import pluggy.
hookimpl = pluggy.HookimplMarker("runpoint")
hookspec = pluggy.HookspecMarker("runpoint")

__all__ = ["hookimpl", "hookspec", "open"]


def __getattr__(name: str) -> Any:
    """`runpoint.open`, runpoint from Python (`runpoint.facade.local.open`, typed there):
    imported when asked for, so that a plugin importing `hookimpl` imports no kernel."""
    if name == "open":
        return importlib.import_module("runpoint.facade.local").open
    raise AttributeError(f"module 'runpoint' has no attribute {name!r}")


# The modules a plugin or an embedding app imported before runpoint was grouped by layer
# (0.1.0), kept as aliases of their new names for one release: importing one warns.
RENAMED = {
    "runpoint.errors": "runpoint.core.errors",
    "runpoint.tenancy": "runpoint.core.tenancy",
    "runpoint.types": "runpoint.core.types",
    "runpoint.transcript": "runpoint.core.transcript",
    "runpoint.group_commit": "runpoint.core.group_commit",
    "runpoint.storage": "runpoint.seams.storage",
    "runpoint.model": "runpoint.seams.model",
    "runpoint.runqueue": "runpoint.seams.runqueue",
    "runpoint.session_state": "runpoint.seams.session_state",
    "runpoint.agent": "runpoint.seams.agent",
    "runpoint.policy": "runpoint.seams.policy",
    "runpoint.hookspecs": "runpoint.seams.hookspecs",
    "runpoint.host": "runpoint.seams.host",
    "runpoint.services": "runpoint.facade",
}


class _Alias(MetaPathFinder, Loader):
    """Finds an old name and hands back the module under its new one (the very module
    object, so classes and their identity are shared)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> ModuleSpec | None:
        if fullname not in RENAMED:
            return None
        warnings.warn(
            f"{fullname} is now {RENAMED[fullname]}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return spec_from_loader(fullname, self)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(RENAMED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module under its new name ran already


sys.meta_path.append(_Alias())
