"""The plugin host: one typed facade over pluggy.

Registration hooks are called once, at start-up, and a name two plugins register is
refused there. Run lifecycle notifications call each implementation on its own, so an
observer that raises is logged and the run goes on.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import pluggy

from runpoint.core.errors import ConfigurationError
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import Approval, Checkpoint, Message, Run, Timing, ToolExecution
from runpoint.seams import hookspecs
from runpoint.seams.agent import Agent
from runpoint.seams.model import Model, ModelProvider
from runpoint.seams.policy import CheckpointPolicy, CheckpointPolicyFactory
from runpoint.seams.retention import Removed
from runpoint.seams.runqueue import RunQueue, RunQueueFactory
from runpoint.seams.session_state import SessionState
from runpoint.seams.storage import Storage, StorageFactory

if TYPE_CHECKING:
    from runpoint.core.keyring import Keyring

NAME = "runpoint"
# Comma-separated plugin names (entry-point names) that are not loaded.
DISABLE_ENV = "RUNPOINT_DISABLE_PLUGINS"

log = logging.getLogger("runpoint.host")
T = TypeVar("T")

# The registration hooks, and what the names they register are called in messages. A
# name two plugins register is refused, except a run queue's: one chosen by the
# database's scheme, which a plugin may take over from the built-in (the last one wins).
REGISTRIES = {
    "runpoint_model_providers": "model provider",
    "runpoint_checkpoint_policies": "checkpoint policy",
    "runpoint_session_state": "session state",
    "runpoint_storage_backends": "storage",
    "runpoint_run_queues": "run queue",
    "runpoint_encryption_keys": "encryption key",
}
REPLACEABLE = {"runpoint_run_queues"}
# How many models the host keeps made: a continue may name any model string, so the oldest
# made is let go past this (and made again if named again).
MODELS_KEPT = 64


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plugin, as `runpoint plugins` lists it."""

    name: str
    distribution: str | None  # "name version", for one loaded from an entry point
    hooks: dict[str, list[str]]  # each hook it implements -> the names it registers there


class RunHooks:
    """The run lifecycle notifications (see `runpoint.seams.hookspecs`). Each implementation is
    called on its own: one that raises is logged in one line and the others, and the
    run, go on."""

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self._manager = manager

    def runpoint_run_started(self, *, run: Run) -> None:
        self._notify("runpoint_run_started", run=run)

    def runpoint_message_appended(self, *, run: Run, message: Message, index: int) -> None:
        self._notify("runpoint_message_appended", run=run, message=message, index=index)

    def runpoint_tool_batch_done(self, *, run: Run, executions: Sequence[ToolExecution]) -> None:
        self._notify("runpoint_tool_batch_done", run=run, executions=executions)

    def runpoint_model_turn_done(
        self,
        *,
        run: Run,
        model: str,
        message: Message | None,
        error: Exception | None,
        timing: Timing,
    ) -> None:
        self._notify(
            "runpoint_model_turn_done",
            run=run,
            model=model,
            message=message,
            error=error,
            timing=timing,
        )

    def runpoint_tool_call_done(self, *, run: Run, message: Message, timing: Timing) -> None:
        self._notify("runpoint_tool_call_done", run=run, message=message, timing=timing)

    def runpoint_checkpoint_written(
        self, *, run: Run, checkpoint: Checkpoint, timing: Timing
    ) -> None:
        self._notify("runpoint_checkpoint_written", run=run, checkpoint=checkpoint, timing=timing)

    def runpoint_run_finished(self, *, run: Run) -> None:
        self._notify("runpoint_run_finished", run=run)

    def runpoint_run_recovered(self, *, run: Run) -> None:
        self._notify("runpoint_run_recovered", run=run)

    def runpoint_approval_requested(self, *, approval: Approval, run: Run) -> None:
        self._notify("runpoint_approval_requested", approval=approval, run=run)

    def runpoint_retention_swept(self, *, removed: Removed, timing: Timing) -> None:
        self._notify("runpoint_retention_swept", removed=removed, timing=timing)

    def runpoint_schedule_fired(
        self, *, schedule: Schedule, fired: ScheduleRun, delay: float
    ) -> None:
        self._notify("runpoint_schedule_fired", schedule=schedule, fired=fired, delay=delay)

    def runpoint_schedule_missed(self, *, schedule: Schedule, ticks: int) -> None:
        self._notify("runpoint_schedule_missed", schedule=schedule, ticks=ticks)

    def runpoint_schedule_retried(self, *, schedule: Schedule, fired: ScheduleRun) -> None:
        self._notify("runpoint_schedule_retried", schedule=schedule, fired=fired)

    def _notify(self, hook: str, **arguments: object) -> None:
        # in pluggy's order: the last registered first
        for impl in reversed(getattr(self._manager.hook, hook).get_hookimpls()):
            try:
                _call(impl, arguments)
            except Exception as exc:
                log.warning("plugin %s failed in %s: %r", impl.plugin_name, hook, exc)


class PluginHost:
    """Loads plugins from the ``runpoint`` entry-point group and answers for them."""

    def __init__(self, extra_plugins: Iterable[object] = ()) -> None:
        self.manager = pluggy.PluginManager(NAME)
        self.manager.add_hookspecs(hookspecs)
        for name in filter(None, (n.strip() for n in os.environ.get(DISABLE_ENV, "").split(","))):
            self.manager.set_blocked(name)
        self.manager.load_setuptools_entrypoints(NAME)
        for plugin in extra_plugins:
            # named in log lines and listings as its module or its class is
            self.manager.register(plugin, name=getattr(plugin, "__name__", type(plugin).__name__))
        # A misspelt hook would otherwise be ignored without a word.
        self.manager.check_pending()
        if wrappers := [
            f"{impl.plugin_name}.{caller.name}"
            for caller in self._callers()
            for impl in caller.get_hookimpls()
            if impl.wrapper or impl.hookwrapper
        ]:
            raise ConfigurationError(f"runpoint hooks take no wrappers: {', '.join(wrappers)}")
        self.hook = RunHooks(self.manager)
        # hook -> name -> (the plugin that registered it, what it registered)
        self._registered = {hook: self._collect(hook) for hook in REGISTRIES}
        # made once per model string: a model holds its SDK client (TLS setup, connections)
        self._models: dict[str, Model] = {}

    def model(self, spec: str) -> Model:
        """The model a string names ("provider:name"), made at the first ask and reused."""
        if (model := self._models.get(spec)) is None:
            model = self._make_model(spec)
            if len(self._models) >= MODELS_KEPT:
                del self._models[next(iter(self._models))]
            self._models[spec] = model
        return model

    def made_models(self) -> list[Model]:
        """The models `model` made and keeps."""
        return list(self._models.values())

    def _make_model(self, spec: str) -> Model:
        prefix, sep, name = spec.partition(":")
        if not sep:
            raise ConfigurationError(f"model {spec!r} is not of the form 'provider:model'")
        providers: dict[str, ModelProvider] = self._registry("runpoint_model_providers")
        if prefix not in providers:
            raise ConfigurationError(f"no model provider {prefix!r} (known: {sorted(providers)})")
        try:
            return providers[prefix](name)
        except ConfigurationError:
            raise
        except Exception as exc:  # a provider refusing the name is a configuration error
            raise ConfigurationError(f"model {spec!r}: {exc}") from exc

    def policy(self, agent: Agent) -> CheckpointPolicy:
        """The agent's checkpoint policy, made with the agent's options."""
        factory: CheckpointPolicyFactory = self._lookup(
            "runpoint_checkpoint_policies", agent.checkpoint
        )
        try:
            return factory(**agent.checkpoint_options)
        except Exception as exc:  # a policy refusing its options is a configuration error
            raise ConfigurationError(
                f"agent {agent.id!r}: checkpoint policy {agent.checkpoint!r} refused the "
                f"options {agent.checkpoint_options!r}: {exc}"
            ) from exc

    def session_states(self) -> dict[str, SessionState]:
        """The registered state-capture objects, by name."""
        return self._registry("runpoint_session_state")

    def storage(self, database: str) -> Storage:
        """The storage of `database`, in any form `database_url` reads; a scheme no plugin
        stores is a ConfigurationError that says which forms are."""
        url = database_url(database)
        backends = self._registry("runpoint_storage_backends")
        factory: StorageFactory | None = backends.get(_scheme(url))
        if factory is None:
            raise ConfigurationError(
                f"database {redacted(database)!r}: no storage named {_scheme(url)!r} "
                f"(known: {', '.join(sorted(backends))}); give a SQLite file's path, "
                f"sqlite:///PATH, postgresql://USER@HOST/NAME or memory:"
            )
        return factory(url)

    def keyring(self, path: str | None = None) -> Keyring | None:
        """The keys that encrypt what is stored: a file's (`Keyring.from_file`) if one is
        named, else those plugins register (a KMS's), else none (nothing is encrypted)."""
        from runpoint.core.keyring import Keyring  # cryptography: only when asked

        if path is not None:
            return Keyring.from_file(path)
        keys: dict[str, bytes] = self._registry("runpoint_encryption_keys")
        return Keyring(keys) if keys else None

    def queue(self, database: str) -> RunQueue | None:
        """The run queue for a database, if a plugin offers one (else runs execute in
        the process that accepts them)."""
        url = database_url(database)
        factory: RunQueueFactory | None = self._registry("runpoint_run_queues").get(_scheme(url))
        return factory(url) if factory else None

    def find(self, kind: type[T]) -> T | None:
        """The loaded plugin that is a `kind`, if any: how an adapter reaches an observer
        it registered (the metrics a scrape reads, say)."""
        return next((p for p in self.manager.get_plugins() if isinstance(p, kind)), None)

    def plugins(self) -> list[PluginInfo]:
        """The loaded plugins, by name."""
        distributions = {
            plugin: f"{dist.project_name} {dist.version}"
            for plugin, dist in self.manager.list_plugin_distinfo()
        }
        hooks: dict[str, dict[str, list[str]]] = {}
        for caller in self._callers():
            registered = self._registered.get(caller.name, {})
            for impl in caller.get_hookimpls():
                names = [n for n, (plugin, _) in registered.items() if plugin == impl.plugin_name]
                hooks.setdefault(impl.plugin_name, {})[caller.name] = sorted(names)
        return [
            PluginInfo(name, distributions.get(plugin), dict(sorted(hooks.get(name, {}).items())))
            for name, plugin in sorted(self.manager.list_name_plugin())
            if plugin is not None
        ]

    def _callers(self) -> list[pluggy.HookCaller]:
        return [getattr(self.manager.hook, name) for name in sorted(vars(self.manager.hook))]

    def _collect(self, hook: str) -> dict[str, tuple[str, Any]]:
        registered: dict[str, tuple[str, Any]] = {}
        for impl in getattr(self.manager.hook, hook).get_hookimpls():  # in registration order
            for name, value in _call(impl, {}).items():
                if name in registered and hook not in REPLACEABLE:
                    raise ConfigurationError(
                        f"plugins {registered[name][0]!r} and {impl.plugin_name!r} both "
                        f"register the {REGISTRIES[hook]} {name!r}"
                    )
                registered[name] = (impl.plugin_name, value)
        return registered

    def _registry(self, hook: str) -> dict[str, Any]:
        return {name: value for name, (_, value) in self._registered[hook].items()}

    def _lookup(self, hook: str, name: str) -> Any:
        registry = self._registry(hook)
        if name not in registry:
            what = REGISTRIES[hook]
            raise ConfigurationError(f"no {what} named {name!r} (known: {sorted(registry)})")
        return registry[name]


def _call(impl: pluggy.HookImpl, arguments: Mapping[str, Any]) -> Any:
    """One hook implementation, given the arguments it takes (as pluggy gives them)."""
    return impl.function(*(arguments[name] for name in impl.argnames))


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.split("+")[0]


def database_url(database: str) -> str:
    """The one reading of a database argument (`Runpoint`, `create_app`, `runpoint.open`,
    `--db`): a URL as given (`sqlite:///...`, `postgresql://...`, `memory:`), or a file
    path as a SQLite URL (a one-letter scheme is a Windows drive), whose directory must
    exist."""
    if len(urlsplit(database).scheme) > 1:
        return database
    path = Path(database).resolve()
    if not path.parent.is_dir():
        raise ConfigurationError(
            f"database {database!r}: no directory {path.parent} for the SQLite file"
        )
    return f"sqlite:///{path}"


def redacted(url: str) -> str:
    """`url` without its password, to say in a message."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)
