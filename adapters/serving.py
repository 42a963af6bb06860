"""`runpoint serve`: the app its settings (runpoint.adapters.settings) describe, and the
checks made before listening, so that a bad start-up input is one line and exit status 2,
never a traceback from a worker."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib
import ipaddress
import logging
import logging.config
import os
import sys
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from runpoint.adapters import logs
from runpoint.adapters.settings import VARIABLES, Settings

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp

    from runpoint.adapters.auth import Auth
    from runpoint.facade import Runpoint
    from runpoint.seams.agent import Agent
    from runpoint.seams.retention import Retention
    from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.serve")
OPEN_ENV = VARIABLES["allow_unauthenticated"]


class StartupError(Exception):
    """A start-up input that cannot work: the command says so in one line, exit status 2."""


def load_agents(spec: str) -> Iterable[Agent]:
    """The agents an import string `module:attribute` names (a list, or a callable)."""
    module, _, attribute = spec.partition(":")
    if not module or not attribute:
        raise StartupError(f"--app wants module:attribute, not {spec!r}")
    if os.getcwd() not in sys.path:  # the user's own modules, as uvicorn finds them
        sys.path.insert(0, os.getcwd())
    try:
        value = getattr(importlib.import_module(module), attribute)
    except ModuleNotFoundError as exc:
        raise StartupError(f"--app {spec}: no module named {exc.name!r}") from exc
    except AttributeError as exc:
        raise StartupError(f"--app {spec}: module {module!r} has no {attribute!r}") from exc
    except ValueError as exc:  # a definition that cannot work (a team's members, say)
        raise StartupError(f"--app {spec}: {exc}") from exc
    agents: list[Agent] = list(value() if callable(value) else value)
    from runpoint.seams.crew import check_crews

    try:
        check_crews(agents)
    except ValueError as exc:
        raise StartupError(f"--app {spec}: {exc}") from exc
    return agents


def auth_for(settings: Settings) -> Auth:
    from runpoint.adapters import auth

    return auth.load(
        api_keys_file=settings.api_keys,
        jwt_secret=settings.jwt_secret,
        jwt_public_key_file=settings.jwt_public_key,
        jwt_audience=settings.jwt_audience,
        jwt_issuer=settings.jwt_issuer,
    )


def retention_of(settings: Settings) -> Retention:
    """The server's retention policy: ValueError, naming the flag, if one is unreadable."""
    from runpoint.seams.retention import Retention, count, duration

    runs, events = settings.retain_runs, settings.retain_events
    checkpoints = settings.retain_checkpoints
    return Retention(
        runs=None if runs is None else duration(runs, "--retain-runs"),
        checkpoints=None if checkpoints is None else count(checkpoints, "--retain-checkpoints"),
        events=None if events is None else duration(events, "--retain-events"),
    )


def keys_kept(settings: Settings) -> float:
    """Seconds an answered Idempotency-Key is kept: ValueError, naming the flag, if
    unreadable."""
    from runpoint.seams.retention import duration

    return duration(settings.retain_keys, "--retain-keys")


def runpoint_for(settings: Settings) -> Runpoint:
    from runpoint.adapters.run_log import RunLog
    from runpoint.adapters.telemetry import observers
    from runpoint.facade import Runpoint
    from runpoint.seams.host import PluginHost

    host = PluginHost([RunLog(), *observers(traces=settings.otel)])
    return Runpoint(
        load_agents(settings.app),
        database=settings.db,
        host=host,
        keyring=host.keyring(settings.encryption_keys),
        lease_seconds=settings.lease_seconds,
        retention=retention_of(settings),
        sweep_seconds=settings.sweep_seconds,
        sweep_batch=settings.sweep_batch,
        retain_keys=keys_kept(settings),
    )


def app_for(rp: Runpoint, settings: Settings) -> Litestar:
    from runpoint.adapters.litestar import build
    from runpoint.adapters.litestar.security import rate_limit

    app = build(
        rp,
        auth=auth_for(settings),
        rate_limit=rate_limit(settings.rate_limit) if settings.rate_limit else None,
        max_body_bytes=settings.max_body_bytes,
        keepalive_seconds=settings.keepalive_seconds,
        cors_origins=settings.cors_origins,
        root_path=settings.root_path or "",
    )
    app.on_startup.append(settle)  # after runpoint's own start (its migrations)
    return app


def settle() -> None:
    """Freeze what the server's start-up made (modules, the app, the database's engine:
    some 100,000 objects, most live as long as the process): the garbage collector leaves
    them out of its collections from then on. Else each full collection walks them all, and
    a long run's batches, whose thousands of objects reach the oldest generation, set off
    several (contrib/bench/storage.py). What start-up left as garbage goes first."""
    gc.collect()
    gc.freeze()


def worker_app(settings: Settings) -> ASGIApp:
    """The app factory uvicorn calls in each worker process (with --workers over 1), which
    has configured its logging already."""
    from runpoint.adapters.request_log import RequestLog

    return RequestLog(app_for(runpoint_for(settings), settings))


def app_from_env() -> ASGIApp:
    """The app the `RUNPOINT_` variables describe, as `runpoint serve` would serve it: a
    factory for `uvicorn --factory runpoint.adapters.serving:app_from_env`."""
    return worker_app(Settings.from_environment())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


@contextlib.asynccontextmanager
async def opened(storage: Storage, db: str) -> AsyncIterator[Storage]:
    """`storage` opened (its migrations applied) and closed after: a database that cannot
    be opened (an unreachable server, an unwritable file) is a StartupError in one line,
    whatever the driver raised."""
    from runpoint.seams.host import redacted

    try:
        await storage.open()
    except Exception as exc:
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise StartupError(f"--db {redacted(db)}: cannot open the database: {reason}") from exc
    try:
        yield storage
    finally:
        await storage.close()


def check_database(rp: Runpoint, db: str) -> None:
    """Open the database once (applying migrations) and close it: a database that cannot
    be opened fails here, not in each worker's start-up."""

    async def open_and_close() -> None:
        async with opened(rp.storage, db):
            pass

    asyncio.run(open_and_close())


def warn_of_models(rp: Runpoint) -> None:
    """A warning for each agent whose model needs an API key it does not have (its runs
    would end ERROR; vendor models name the variable they read in `api_key_env`), and for
    each whose model its vendor has deprecated (`deprecation()`, the SDK's notice)."""
    for agent in rp.agents.values():
        model = rp.host.model(agent.model) if isinstance(agent.model, str) else agent.model
        variable = getattr(model, "api_key_env", None)
        if variable and not getattr(model, "api_key", None) and not os.environ.get(variable):
            log.warning(
                "agent %s: model %s has no API key (set %s): its runs will end ERROR",
                agent.id,
                model.name,
                variable,
            )
        deprecation = getattr(model, "deprecation", None)
        if deprecation is not None and (notice := deprecation()):
            log.warning("agent %s: model %s is %s", agent.id, model.name, notice)


def ready_models(rp: Runpoint) -> None:
    """Make each agent's vendor SDK client now, where its API key is there: else the first
    run pays for it (its HTTP transport's imports and TLS certificates: about 0.1 s of CPU
    and, on a busy machine, several times that of waiting). One without its key stays
    unmade: its runs fail, not the server."""
    for agent in rp.agents.values():
        model = rp.host.model(agent.model) if isinstance(agent.model, str) else agent.model
        variable, client = getattr(model, "api_key_env", None), getattr(model, "client", None)
        if client and (getattr(model, "api_key", None) or (variable and os.environ.get(variable))):
            client()


def serve(settings: Settings) -> None:
    """Check every input, build the app once, then listen."""
    from runpoint.core.errors import RunpointError

    log_config = logs.config(settings.log_level, settings.log_format)
    logging.config.dictConfig(log_config)
    try:
        open_ = auth_for(settings).is_open
        if open_ and not is_loopback(settings.host) and not settings.allow_unauthenticated:
            raise StartupError(
                f"refusing to serve {settings.host} with no authentication: anyone who reaches "
                "it could read and run everything. Give --api-keys or a JWT key, or pass "
                f"--allow-unauthenticated (or set {OPEN_ENV}=1) if that is what you want."
            )
        rp = runpoint_for(settings)
        app = app_for(rp, settings)
        check_database(rp, settings.db)
    except (ValueError, OSError, RunpointError) as exc:
        raise StartupError(str(exc)) from exc
    warn_of_models(rp)
    if settings.workers == 1:  # else each worker makes its own
        ready_models(rp)
    listen(app, settings, log_config)


def listen(app: Litestar, settings: Settings, log_config: dict[str, Any]) -> None:
    """Serve `app` in this process, or, with more than one worker, an app each worker
    process builds from `settings`: uvicorn's factory mode, the factory a `worker_app`
    bound to them, which reaches each worker in the configuration uvicorn pickles to it
    (a spawned process starts from nothing: no module state, no flags)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from runpoint.adapters.request_log import RequestLog

    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "workers": settings.workers,
        "log_level": settings.log_level,
        "log_config": log_config,  # every line in one format, in each worker too
        "access_log": False,  # RequestLog's lines say more
        "ws": "none",  # nothing here is a WebSocket: its protocol's import is start-up time
    }
    if settings.workers == 1:
        uvicorn.run(RequestLog(app), **options)
        return
    # uvicorn.run takes only an import string for workers, which cannot carry settings
    factory = functools.partial(worker_app, settings)
    config = uvicorn.Config(factory, factory=True, **options)
    Multiprocess(config, sockets=[config.bind_socket()]).run()
