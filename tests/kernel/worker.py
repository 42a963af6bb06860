"""One of several processes on one database: `python -m tests.kernel.worker DB NAME SHARED`.

It drives concurrent work at its own engine: runs in new sessions, runs in the SHARED
session (waiting their turn), continues and forks of runs any process made, and a
session fork; then prints how many of each it did."""

from __future__ import annotations

import asyncio
import json
import random
import sys

from runpoint.core.errors import Conflict
from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun, ForkSession, Runpoint
from runpoint.plugins.demo import agents

QUESTIONS = ("Paris and Tokyo", "Lagos, Kyoto and Lima", "Cairo", "Sydney and London")


async def main(database: str, name: str, shared: str) -> None:
    rng = random.Random(name)
    done = {"created": 0, "shared": 0, "forked": 0, "session_forks": 0}
    async with Runpoint(agents, database=database, busy_session="wait", busy_timeout=60) as rp:

        async def create() -> None:
            await (
                await rp.create_run(
                    CreateRun(agent_id="travel-agent", message=rng.choice(QUESTIONS))
                )
            ).result()
            done["created"] += 1

        async def in_shared_session() -> None:
            handle = await rp.create_run(
                CreateRun(agent_id="travel-agent", message=rng.choice(QUESTIONS), session_id=shared)
            )
            await handle.result()
            done["shared"] += 1

        async def fork_someones_run() -> None:
            sessions = await rp.list_sessions(limit=20)
            runs = [r for s in sessions for r in await rp.list_runs(s.session_id)]
            finished = [r for r in runs if r.status is RunStatus.COMPLETED]
            if not finished:
                return
            source = rng.choice(finished)
            _, timeline = await rp.timeline(source.run_id)
            index = rng.choice(timeline).message_index
            handle = await rp.continue_run(
                ContinueRun(run_id=source.run_id, continue_from=index, input="Only Lima")
            )
            await handle.result()
            done["forked"] += 1

        async def fork_a_session() -> None:
            sessions = [s for s in await rp.list_sessions(limit=20) if s.session_id != shared]
            if sessions:
                try:
                    await rp.fork_session(ForkSession(session_id=rng.choice(sessions).session_id))
                    done["session_forks"] += 1
                except Conflict:  # a run of it was in flight
                    pass

        for _ in range(4):
            await asyncio.gather(
                create(), create(), in_shared_session(), fork_someones_run(), fork_a_session()
            )
    print(json.dumps(done), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
