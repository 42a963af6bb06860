"""`runpoint serve`: its options (each one also an environment variable, which a flag
overrides and a default never does), the app they describe, and the checks made before
listening, so that a bad start-up input is one line and exit status 2, never a traceback
from a worker."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import ipaddress
import logging
import logging.config
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from runpoint.adapters import logs

if TYPE_CHECKING:
    from litestar import Litestar
    from litestar.types import ASGIApp

    from runpoint.adapters.auth import Auth
    from runpoint.facade import Runpoint
    from runpoint.seams.agent import Agent
    from runpoint.seams.retention import Retention
    from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.serve")


class StartupError(Exception):
    """A start-up input that cannot work: the command says so in one line, exit status 2."""


@dataclass(frozen=True)
class Option:
    flag: str
    variable: str
    help: str
    default: Any = None
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    def add_to(self, parser: argparse._ActionsContainer) -> None:
        default = f"; default: {self.default}" if self.default is not None else ""
        parser.add_argument(
            self.flag,
            type=self.type,
            choices=self.choices,
            # argparse converts a string default with `type`: a bad $VARIABLE is a usage error
            default=os.environ.get(self.variable, self.default),
            help=f"{self.help} (${self.variable}{default})",
        )


DB = Option(
    "--db", "RUNPOINT_DB", "database URL (postgresql://..., memory:) or SQLite file", "runpoint.db"
)
APP = Option(
    "--app", "RUNPOINT_APP", "agents to serve, as module:attribute", "runpoint.plugins.demo:agents"
)
LEASE = Option(
    "--lease-seconds",
    "RUNPOINT_LEASE_SECONDS",
    "how long a run executing here is held before another process may resume it",
    30.0,
    float,
)
LISTEN = (
    Option("--host", "RUNPOINT_HOST", "address to listen on", "127.0.0.1"),
    Option("--port", "RUNPOINT_PORT", "port to listen on", 7777, int),
    Option("--workers", "RUNPOINT_WORKERS", "server processes", 1, int),
    Option(
        "--log-level",
        "RUNPOINT_LOG_LEVEL",
        "least severe log messages shown",
        "info",
        choices=("critical", "error", "warning", "info", "debug", "trace"),
    ),
    Option(
        "--log-format",
        "RUNPOINT_LOG_FORMAT",
        "log lines as text, or as JSON objects (one a line) for machines",
        "text",
        choices=logs.FORMATS,
    ),
    KEEPALIVE := Option(
        "--keepalive-seconds",
        "RUNPOINT_KEEPALIVE_SECONDS",
        "an event stream quiet this long sends a keep-alive comment",
        15.0,
        float,
    ),
)
ACCESS = (
    Option(
        "--api-keys", "RUNPOINT_API_KEYS_FILE", "a YAML file of API keys' SHA-256s and principals"
    ),
    Option(
        "--jwt-public-key", "RUNPOINT_JWT_PUBLIC_KEY_FILE", "a PEM file: accept JWTs it verifies"
    ),
    Option("--jwt-audience", "RUNPOINT_JWT_AUDIENCE", "JWTs must carry this `aud`"),
    Option("--jwt-issuer", "RUNPOINT_JWT_ISSUER", "JWTs must carry this `iss`"),
    Option(
        "--rate-limit",
        "RUNPOINT_RATE_LIMIT",
        "requests per principal, and failed authentications per client address, e.g. 600/minute",
    ),
    MAX_BODY := Option(
        "--max-body-bytes", "RUNPOINT_MAX_BODY_BYTES", "largest request body, bytes", 10**7, int
    ),
)
RETAIN = (
    RETAIN_RUNS := Option(
        "--retain-runs",
        "RUNPOINT_RETAIN_RUNS",
        "remove a finished run this long after it finished, e.g. 30d, 12h, 90m (default: never)",
    ),
    RETAIN_CHECKPOINTS := Option(
        "--retain-checkpoints",
        "RUNPOINT_RETAIN_CHECKPOINTS",
        "keep this many last checkpoints of a finished run, its end always (default: all)",
    ),
    RETAIN_EVENTS := Option(
        "--retain-events",
        "RUNPOINT_RETAIN_EVENTS",
        "drop the event log of a run this long after it finished (default: never)",
    ),
)
SWEEP = (
    SWEEP_SECONDS := Option(
        "--sweep-seconds", "RUNPOINT_SWEEP_SECONDS", "seconds between retention sweeps", 60.0, float
    ),
    SWEEP_BATCH := Option(
        "--sweep-batch", "RUNPOINT_SWEEP_BATCH", "finished runs a sweep reads at most", 200, int
    ),
)
JWT_SECRET_ENV = "RUNPOINT_JWT_SECRET"  # a secret has no option: command lines are public
OPEN_ENV = "RUNPOINT_ALLOW_UNAUTHENTICATED"
OTEL_ENV = "RUNPOINT_OTEL"
ACCESS_HELP = f"""With no API keys and no JWT key the server is open: every request acts as one
default team. Set ${JWT_SECRET_ENV} to accept HS256 JWTs signed with it."""


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    for option in (APP, DB, *LISTEN, LEASE):
        option.add_to(parser)
    add_retention_options(parser)
    for option in SWEEP:
        option.add_to(parser)
    access = parser.add_argument_group("access", ACCESS_HELP)
    for option in ACCESS:
        option.add_to(access)
    access.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=is_set(OPEN_ENV),
        help=f"serve an address other than loopback with no authentication (${OPEN_ENV})",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        default=is_set(OTEL_ENV),
        help="send OpenTelemetry traces, set up by the standard OTEL_* variables "
        f"(needs runpoint[otel]; ${OTEL_ENV})",
    )


def add_retention_options(parser: argparse.ArgumentParser) -> None:
    retention = parser.add_argument_group(
        "retention", "what finished runs keep how long (an agent's `retention` overrides)"
    )
    for option in RETAIN:
        option.add_to(retention)


def retention_from_env() -> Retention:
    """The server's retention policy: ValueError, naming the flag, if one is unreadable."""
    from runpoint.seams.retention import Retention, count, duration

    env = os.environ.get
    runs, checkpoints, events = (env(o.variable) for o in RETAIN)
    return Retention(
        runs=None if runs is None else duration(runs, RETAIN_RUNS.flag),
        checkpoints=None if checkpoints is None else count(checkpoints, RETAIN_CHECKPOINTS.flag),
        events=None if events is None else duration(events, RETAIN_EVENTS.flag),
    )


def is_set(variable: str) -> bool:
    """Whether a yes-or-no environment variable says yes."""
    return os.environ.get(variable, "").lower() in ("1", "true", "yes")


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
    agents: Iterable[Agent] = value() if callable(value) else value
    return agents


def database_url(db: str) -> str:
    """A database URL as given (`postgresql://...`, `memory:`), or a file path as a SQLite
    URL (a one-letter scheme is a Windows drive)."""
    if len(urlsplit(db).scheme) > 1:
        return db
    path = Path(db).resolve()
    if not path.parent.is_dir():
        raise StartupError(f"--db {db}: no directory {path.parent} for the SQLite file")
    return f"sqlite:///{path}"


def without_password(url: str) -> str:
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


def auth_from_env() -> Auth:
    from runpoint.adapters import auth

    env = os.environ.get
    return auth.load(
        api_keys_file=env("RUNPOINT_API_KEYS_FILE"),
        jwt_secret=env(JWT_SECRET_ENV),
        jwt_public_key_file=env("RUNPOINT_JWT_PUBLIC_KEY_FILE"),
        jwt_audience=env("RUNPOINT_JWT_AUDIENCE"),
        jwt_issuer=env("RUNPOINT_JWT_ISSUER"),
    )


def runpoint_from_env() -> Runpoint:
    from runpoint.adapters.run_log import RunLog
    from runpoint.adapters.telemetry import observers
    from runpoint.facade import Runpoint
    from runpoint.seams.host import PluginHost

    return Runpoint(
        load_agents(os.environ.get(APP.variable, APP.default)),
        database=database_url(os.environ.get(DB.variable, DB.default)),
        host=PluginHost([RunLog(), *observers(traces=is_set(OTEL_ENV))]),
        lease_seconds=float(os.environ.get(LEASE.variable, LEASE.default)),
        retention=retention_from_env(),
        sweep_seconds=float(os.environ.get(SWEEP_SECONDS.variable, SWEEP_SECONDS.default)),
        sweep_batch=int(os.environ.get(SWEEP_BATCH.variable, SWEEP_BATCH.default)),
    )


def app_for(rp: Runpoint) -> Litestar:
    from runpoint.adapters.litestar import build
    from runpoint.adapters.litestar.security import rate_limit

    limit = os.environ.get("RUNPOINT_RATE_LIMIT")
    return build(
        rp,
        auth=auth_from_env(),
        rate_limit=rate_limit(limit) if limit else None,
        max_body_bytes=int(os.environ.get(MAX_BODY.variable, MAX_BODY.default)),
        keepalive_seconds=float(os.environ.get(KEEPALIVE.variable, KEEPALIVE.default)),
    )


def app_from_env() -> ASGIApp:
    """The app factory uvicorn calls in each worker process (with --workers over 1), which
    has configured its logging already."""
    from runpoint.adapters.request_log import RequestLog

    return RequestLog(app_for(runpoint_from_env()))


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
    try:
        await storage.open()
    except Exception as exc:
        reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
        raise StartupError(
            f"--db {without_password(db)}: cannot open the database: {reason}"
        ) from exc
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


def serve(args: argparse.Namespace) -> None:
    """Check every input, build the app once, then listen."""
    from runpoint.core.errors import RunpointError

    for option in (APP, DB, *LISTEN, LEASE, *ACCESS, *RETAIN, *SWEEP):  # for workers' apps
        if (value := getattr(args, option.dest)) is not None:
            os.environ[option.variable] = str(value)
    if args.otel:
        os.environ[OTEL_ENV] = "1"
    log_config = logs.config(args.log_level, args.log_format)
    logging.config.dictConfig(log_config)
    try:
        open_ = auth_from_env().is_open
        if open_ and not is_loopback(args.host) and not args.allow_unauthenticated:
            raise StartupError(
                f"refusing to serve {args.host} with no authentication: anyone who reaches it "
                "could read and run everything. Give --api-keys or a JWT key, or pass "
                f"--allow-unauthenticated (or set {OPEN_ENV}=1) if that is what you want."
            )
        rp = runpoint_from_env()
        app = app_for(rp)
        check_database(rp, args.db)
    except (ValueError, OSError, RunpointError) as exc:
        raise StartupError(str(exc)) from exc
    warn_of_models(rp)
    import uvicorn

    from runpoint.adapters.request_log import RequestLog

    uvicorn.run(
        # more than one worker: each process builds its own app from the environment
        RequestLog(app) if args.workers == 1 else "runpoint.adapters.serving:app_from_env",
        factory=args.workers > 1,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        log_config=log_config,  # every line in one format, in each worker too
        access_log=False,  # RequestLog's lines say more
        ws="none",  # nothing here is a WebSocket: its protocol's import is start-up time
    )
