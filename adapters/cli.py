"""The `runpoint` command: `runpoint serve` runs the HTTP server (uvicorn)."""

from __future__ import annotations

import argparse
import importlib
import ipaddress
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from litestar import Litestar

    from runpoint.adapters.auth import Auth
    from runpoint.agent import Agent

DEFAULT_APP = "runpoint.plugins.demo:agents"
DEFAULT_DB = "runpoint.db"
DEFAULT_LEASE_SECONDS = 30.0
# `serve` hands its choices to the app factory (in each worker process) through these
APP_ENV, DB_ENV, LEASE_ENV = "RUNPOINT_APP", "RUNPOINT_DB", "RUNPOINT_LEASE_SECONDS"
DB_HELP = "database URL or SQLite file (default: $RUNPOINT_DB or ./runpoint.db)"
# options of `serve` that are also environment variables: (option, variable, help)
ACCESS_OPTIONS = (
    ("--api-keys", "RUNPOINT_API_KEYS_FILE", "a YAML file of API keys' SHA-256s and principals"),
    ("--jwt-public-key", "RUNPOINT_JWT_PUBLIC_KEY_FILE", "a PEM file: accept JWTs it verifies"),
    ("--jwt-audience", "RUNPOINT_JWT_AUDIENCE", "JWTs must carry this `aud`"),
    ("--jwt-issuer", "RUNPOINT_JWT_ISSUER", "JWTs must carry this `iss`"),
    (
        "--rate-limit",
        "RUNPOINT_RATE_LIMIT",
        "requests per principal, and failed authentications per client address, "
        "e.g. 600/minute (default: none)",
    ),
    (
        "--max-body-bytes",
        "RUNPOINT_MAX_BODY_BYTES",
        "largest request body in bytes (default: 10000000)",
    ),
)
JWT_SECRET_ENV = "RUNPOINT_JWT_SECRET"  # a secret has no option: command lines are public
OPEN_ENV = "RUNPOINT_ALLOW_UNAUTHENTICATED"
ACCESS_HELP = f"""With no API keys and no JWT key the server is open: every request acts as one
default team. Set ${JWT_SECRET_ENV} to accept HS256 JWTs signed with it."""


def load_agents(spec: str) -> Iterable[Agent]:
    """The agents an import string `module:attribute` names (a list, or a callable)."""
    module, _, attribute = spec.partition(":")
    if not attribute:
        raise SystemExit(f"--app wants module:attribute, not {spec!r}")
    if os.getcwd() not in sys.path:  # the user's own modules, as uvicorn finds them
        sys.path.insert(0, os.getcwd())
    value = getattr(importlib.import_module(module), attribute)
    agents: Iterable[Agent] = value() if callable(value) else value
    return agents


def database_url(db: str) -> str:
    """A database URL as given (`postgresql://...`, `memory:`), or a file path as a SQLite
    URL (a one-letter scheme is a Windows drive)."""
    return db if len(urlsplit(db).scheme) > 1 else f"sqlite:///{Path(db).resolve()}"


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


def app_from_env() -> Litestar:
    """The app factory uvicorn calls in each worker."""
    from runpoint.adapters.litestar import create_app
    from runpoint.adapters.litestar.security import rate_limit

    agents = load_agents(os.environ.get(APP_ENV, DEFAULT_APP))
    limit = os.environ.get("RUNPOINT_RATE_LIMIT")
    max_body = os.environ.get("RUNPOINT_MAX_BODY_BYTES")
    return create_app(
        agents,
        database=database_url(os.environ.get(DB_ENV, DEFAULT_DB)),
        lease_seconds=float(os.environ.get(LEASE_ENV, DEFAULT_LEASE_SECONDS)),
        auth=auth_from_env(),
        rate_limit=rate_limit(limit) if limit else None,
        **({"max_body_bytes": int(max_body)} if max_body else {}),
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    os.environ[APP_ENV] = args.app
    os.environ[DB_ENV] = args.db
    os.environ[LEASE_ENV] = str(args.lease_seconds)
    for option, variable, _ in ACCESS_OPTIONS:
        if (value := getattr(args, option[2:].replace("-", "_"))) is not None:
            os.environ[variable] = str(value)
    try:
        # fail here, once, on a bad --app, document or access option, not in every worker
        open_ = auth_from_env().is_open
        app_from_env()
    except (ValueError, OSError) as exc:
        raise SystemExit(f"runpoint serve: {exc}") from None
    if open_ and not is_loopback(args.host) and not args.allow_unauthenticated:
        raise SystemExit(
            f"runpoint serve: refusing to serve {args.host} with no authentication: anyone "
            "who reaches it could read and run everything. Give --api-keys or a JWT key, "
            f"or pass --allow-unauthenticated (or set {OPEN_ENV}=1) if that is what you want."
        )
    uvicorn.run(
        "runpoint.adapters.cli:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
    )


def upgrade_database(db: str) -> None:
    """Bring the database's schema up to date (opening storage applies its migrations)."""
    import asyncio

    from runpoint.host import PluginHost

    async def upgrade() -> None:
        storage = PluginHost().storage(database_url(db))
        await storage.open()
        await storage.close()

    asyncio.run(upgrade())


def lock_session(db: str, session_id: str, lock: bool) -> str:
    """Lock a session for maintenance (the session dialect answers 423 until it is
    unlocked), or lift whatever lock it has (a rollback's too, leaving the session as its
    runs say; one whose process died needs no operator: the next request completes it)."""
    import asyncio

    from runpoint.errors import RunpointError
    from runpoint.host import PluginHost

    async def change() -> str:
        storage = PluginHost().storage(database_url(db))
        await storage.open()
        try:
            if lock:
                done = await storage.lock_session(session_id, "maintenance")
            else:
                done = await storage.unlock_session(session_id)
        except RunpointError as exc:
            return f"session {session_id}: {exc}"
        finally:
            await storage.close()
        if not done:
            return f"session {session_id}: not found"
        return f"session {session_id}: {'locked' if lock else 'unlocked'}"

    return asyncio.run(change())


def list_plugins() -> str:
    """The loaded plugins: each one's distribution, hooks and the names it registers."""
    from runpoint.errors import ConfigurationError
    from runpoint.host import PluginHost

    try:
        plugins = PluginHost().plugins()
    except ConfigurationError as exc:  # two plugins claim one name, say
        raise SystemExit(f"runpoint: {exc}") from None
    lines = []
    for plugin in plugins:
        lines.append(
            f"{plugin.name}  ({plugin.distribution})" if plugin.distribution else plugin.name
        )
        for hook, names in plugin.hooks.items():
            lines.append(f"  {hook}: {', '.join(names)}" if names else f"  {hook}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="runpoint", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    sub.add_parser("plugins", help="list the loaded plugins, their hooks and what they register")
    run = sub.add_parser("serve", help="serve the run dialect over HTTP")
    run.add_argument("--app", default=DEFAULT_APP, help="agents to serve, as module:attribute")
    run.add_argument("--db", default=os.environ.get(DB_ENV, DEFAULT_DB), help=DB_HELP)
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=7777)
    run.add_argument("--workers", type=int, default=1)
    run.add_argument("--log-level", default="info")
    run.add_argument(
        "--lease-seconds",
        type=float,
        default=DEFAULT_LEASE_SECONDS,
        help="how long a run executing here is held before another process may resume it",
    )
    access = run.add_argument_group("access", ACCESS_HELP)
    for option, variable, help_ in ACCESS_OPTIONS:
        kind = int if option == "--max-body-bytes" else str
        access.add_argument(
            option, type=kind, default=os.environ.get(variable), help=f"{help_} (${variable})"
        )
    access.add_argument(
        "--allow-unauthenticated",
        action="store_true",
        default=os.environ.get(OPEN_ENV, "").lower() in ("1", "true", "yes"),
        help=f"serve an address other than loopback with no authentication (${OPEN_ENV})",
    )
    db = sub.add_parser("db", help="manage the database").add_subparsers(
        dest="db_command", required=True
    )
    upgrade = db.add_parser("upgrade", help="apply the schema migrations")
    upgrade.add_argument("--db", default=os.environ.get(DB_ENV, DEFAULT_DB), help=DB_HELP)
    session = sub.add_parser("session", help="lock a session for maintenance, or unlock it")
    actions = session.add_subparsers(dest="session_command", required=True)
    for action in ("lock", "unlock"):
        change = actions.add_parser(action, help=f"{action} a session")
        change.add_argument("session_id")
        change.add_argument("--db", default=os.environ.get(DB_ENV, DEFAULT_DB), help=DB_HELP)
    args = parser.parse_args(argv)
    if args.command == "version":
        from importlib.metadata import version

        print(version("runpoint"))
    elif args.command == "plugins":
        print(list_plugins())
    elif args.command == "serve":
        serve(args)
    elif args.command == "db":
        upgrade_database(args.db)
        print(f"{args.db}: schema up to date")
    elif args.command == "session":
        outcome = lock_session(args.db, args.session_id, args.session_command == "lock")
        print(outcome)
        return 0 if outcome.endswith("locked") else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
