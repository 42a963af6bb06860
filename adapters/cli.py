"""The `runpoint` command: `runpoint serve` runs the HTTP server (uvicorn); the other
commands manage its database and plugins. Each imports what it needs when it runs: a
command should exit in a fraction of a second."""

from __future__ import annotations

import argparse
import sys

from runpoint.adapters.db_commands import (
    add_db_commands,
    add_team_commands,
    backup,
    erase_team,
    prune,
    reseal,
)
from runpoint.adapters.serving import StartupError, is_loopback, opened, serve
from runpoint.adapters.settings import Settings, add_options

__all__ = ["is_loopback", "main"]


def upgrade_database(db: str) -> None:
    """Bring the database's schema up to date (opening storage applies its migrations)."""
    import asyncio

    from runpoint.seams.host import PluginHost

    async def upgrade() -> None:
        async with opened(PluginHost().storage(db), db):
            pass

    asyncio.run(upgrade())


def lock_session(db: str, session_id: str, lock: bool) -> str:
    """Lock a session for maintenance (the session dialect answers 423 until it is
    unlocked), or lift whatever lock it has (a rollback's too, leaving the session as its
    runs say; one whose process died needs no operator: the next request completes it)."""
    import asyncio

    from runpoint.core.errors import RunpointError
    from runpoint.seams.host import PluginHost

    async def change() -> str:
        async with opened(PluginHost().storage(db), db) as storage:
            try:
                if lock:
                    done = await storage.lock_session(session_id, "maintenance")
                else:
                    done = await storage.unlock_session(session_id)
            except RunpointError as exc:
                return f"session {session_id}: {exc}"
        if not done:
            return f"session {session_id}: not found"
        return f"session {session_id}: {'locked' if lock else 'unlocked'}"

    return asyncio.run(change())


def list_plugins() -> str:
    """The loaded plugins: each one's distribution, hooks and the names it registers."""
    from runpoint.seams.host import PluginHost

    lines = []
    for plugin in PluginHost().plugins():
        lines.append(
            f"{plugin.name}  ({plugin.distribution})" if plugin.distribution else plugin.name
        )
        for hook, names in plugin.hooks.items():
            lines.append(f"  {hook}: {', '.join(names)}" if names else f"  {hook}")
    return "\n".join(lines)


def version() -> str:
    from importlib.metadata import version

    return version("runpoint")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runpoint", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"runpoint {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    sub.add_parser("plugins", help="list the loaded plugins, their hooks and what they register")
    add_options(sub.add_parser("serve", help="serve the run dialect over HTTP"))
    db = sub.add_parser("db", help="manage the database").add_subparsers(
        dest="db_command", required=True
    )
    add_options(db.add_parser("upgrade", help="apply the schema migrations"), "db")
    add_db_commands(db)
    team = sub.add_parser("team", help="erase a team (crypto-shredding)").add_subparsers(
        dest="team_command", required=True
    )
    add_team_commands(team)
    session = sub.add_parser("session", help="lock a session for maintenance, or unlock it")
    actions = session.add_subparsers(dest="session_command", required=True)
    for action in ("lock", "unlock"):
        change = actions.add_parser(action, help=f"{action} a session")
        change.add_argument("session_id", help="the session's id")
        add_options(change, "db")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from runpoint.core.errors import ConfigurationError

    try:
        return run(args)
    except (StartupError, ConfigurationError) as exc:  # a bad input: one line, like a usage error
        print(f"{command(args)}: {exc}", file=sys.stderr)
        return 2


def command(args: argparse.Namespace) -> str:
    """The command line's command, as `runpoint session lock`."""
    words = ("command", "db_command", "session_command", "team_command")
    return " ".join(["runpoint", *filter(None, (getattr(args, w, None) for w in words))])


def run(args: argparse.Namespace) -> int:
    if args.command == "version":
        print(version())
    elif args.command == "plugins":
        print(list_plugins())
    elif args.command == "serve":
        serve(Settings.of(args))
    elif args.command == "db" and args.db_command == "prune":
        print("\n".join(prune(args)))
    elif args.command == "db" and args.db_command == "backup":
        print(backup(args.db, args.path))
    elif args.command == "db" and args.db_command in ("encrypt", "rotate-key"):
        lines, status = reseal(args, encrypt=args.db_command == "encrypt")
        print("\n".join(lines))
        return status
    elif args.command == "db":
        upgrade_database(args.db)
        print(f"{args.db}: schema up to date")
    elif args.command == "team":
        lines, status = erase_team(args)
        print("\n".join(lines), file=sys.stdout if status == 0 else sys.stderr)
        return status
    elif args.command == "session":
        outcome = lock_session(args.db, args.session_id, args.session_command == "lock")
        print(outcome)
        return 0 if outcome.endswith("locked") else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
