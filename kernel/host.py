"""The plugin host: one typed facade over pluggy."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TypeVar
from urllib.parse import urlsplit

import pluggy

from runpoint import hookspecs
from runpoint.errors import ConfigurationError
from runpoint.model import Model, ModelProvider
from runpoint.policy import CheckpointPolicy
from runpoint.runqueue import RunQueue, RunQueueFactory
from runpoint.session_state import SessionState
from runpoint.storage import Storage, StorageFactory

NAME = "runpoint"
# Comma-separated plugin names (entry-point names) that are not loaded.
DISABLE_ENV = "RUNPOINT_DISABLE_PLUGINS"

T = TypeVar("T")


class PluginHost:
    """Loads plugins from the ``runpoint`` entry-point group and answers for them."""

    def __init__(self, extra_plugins: Iterable[object] = ()) -> None:
        self.manager = pluggy.PluginManager(NAME)
        self.manager.add_hookspecs(hookspecs)
        for name in filter(None, (n.strip() for n in os.environ.get(DISABLE_ENV, "").split(","))):
            self.manager.set_blocked(name)
        self.manager.load_setuptools_entrypoints(NAME)
        for plugin in extra_plugins:
            self.manager.register(plugin)
        # A misspelt hook would otherwise be ignored without a word.
        self.manager.check_pending()

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.manager.hook

    def model(self, spec: str) -> Model:
        prefix, sep, name = spec.partition(":")
        if not sep:
            raise ConfigurationError(f"model {spec!r} is not of the form 'provider:model'")
        providers: dict[str, ModelProvider] = _merge(self.hook.runpoint_model_providers())
        if prefix not in providers:
            raise ConfigurationError(f"no model provider {prefix!r} (known: {sorted(providers)})")
        try:
            return providers[prefix](name)
        except ConfigurationError:
            raise
        except Exception as exc:  # a provider refusing the name is a configuration error
            raise ConfigurationError(f"model {spec!r}: {exc}") from exc

    def policy(self, name: str) -> CheckpointPolicy:
        policies = self.hook.runpoint_checkpoint_policies()
        policy: CheckpointPolicy = _lookup(policies, name, "checkpoint policy")
        return policy

    def session_states(self) -> dict[str, SessionState]:
        """The registered state-capture objects, by name."""
        return _merge(self.hook.runpoint_session_state())

    def storage(self, url: str) -> Storage:
        factory: StorageFactory = _lookup(
            self.hook.runpoint_storage_backends(), _scheme(url), "storage"
        )
        return factory(url)

    def queue(self, url: str) -> RunQueue | None:
        """The run queue for a database, if a plugin offers one (else runs execute in
        the process that accepts them)."""
        queues: dict[str, RunQueueFactory] = _merge(self.hook.runpoint_run_queues())
        factory = queues.get(_scheme(url))
        return factory(url) if factory else None


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.split("+")[0]


def _merge(results: Iterable[Mapping[str, T]]) -> dict[str, T]:
    # pluggy calls the last registered plugin first; let earlier ones not shadow later ones.
    merged: dict[str, T] = {}
    for result in reversed(list(results)):
        merged.update(result)
    return merged


def _lookup(results: Iterable[Mapping[str, T]], name: str, what: str) -> T:
    registry = _merge(results)
    if name not in registry:
        raise ConfigurationError(f"no {what} named {name!r} (known: {sorted(registry)})")
    return registry[name]
