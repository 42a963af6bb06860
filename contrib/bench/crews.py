"""Team benchmark: a team run of a leader and 3 members (100 member tool batches in all)
through the OpenAI provider (the official SDK) against the loopback vendor
(`providers.py`'s), served by `runpoint serve`:

    .venv/bin/python contrib/bench/crews.py [--rounds 3] [--kills 3] [--lease 1.0]

1. Cost: the team run beside an agent run of as many model turns (105: the leader's
   delegation turn and answer, and each member's 33 or 34 tool batches and answer, against
   104 tool batches and an answer), built over HTTP (`stream=false`) one after the other,
   with the server's wall time and CPU per model turn (`vs_agno.py`'s measure) and the
   ratios, team / agent (target: within 1.2x). Medians of `--rounds`, after a warm-up run
   of each.
2. Recovery: the server executing the team run is killed with SIGKILL once half its member
   tool batches are done, while a second `runpoint serve` on the same database stands by.
   Per kill it gives the time until a member tool runs again (in the standby) and until
   the team run completes, and counts, at the tool, the member tool calls that ran again
   (target: 0). The tool is side-effecting: a call under way at the kill is in doubt and
   pauses its member and the team run, and is decided as an operator would, from the
   tool's own record, with the continue of the team run.

Both parts on SQLite and on a throwaway PostgreSQL (`databases.py`). On a shared machine
compare the ratios and counts, not the seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
from databases import databases
from providers import PROVIDERS, vendor_server
from vs_agno import HERE, Built, measure, server

from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import DELEGATE, Crew
from tests.providers import wire

MODEL = f"openai:{PROVIDERS['openai']}"
MEMBERS = ("m1", "m2", "m3")
SHARES = (33, 33, 34)  # each member's tool batches: 100 in all
TURNS = 2 + sum(SHARES) + len(MEMBERS)  # an agent run of as many: 104 tool batches
RECORD = "CREW_BENCH_RECORD"  # the file the member tool records each execution in


@tool
def visit(step: str) -> str:
    """Do one step of the task (a side effect: each execution is recorded, with the
    process that made it and when).

    Args:
        step: The step.
    """
    with open(os.environ[RECORD], "a") as record:  # one short append: whole lines
        record.write(f"{step} {os.getpid()} {time.time()}\n")
    return f"{step}: done"


# what `runpoint serve --app crews:agents` serves
agents = [
    *(Agent(id=m, model=MODEL, tools=[visit], max_turns=10**6) for m in MEMBERS),
    Crew(id="crew", model=MODEL, members=list(MEMBERS)),
    Agent(id="solo", model=MODEL, tools=[visit], max_turns=10**6),
]


def turn(history: list[str]) -> wire.Turn:
    """The vendor's answer to a conversation (`providers.conversation`) whose last message
    is "TAG calls: K": K `visit` calls, one a turn, then an answer; or, from a leader,
    "TAG calls: K1 K2 K3": a delegation of "TAG.mI calls: KI" to each member in one turn,
    then an answer once they have answered. Call ids are new each time, as a vendor's are:
    a leader asked again names other calls (a member run is found by its call's id), and
    two members' calls never share an id (a person's decision is addressed by it)."""
    asked = max(i for i, entry in enumerate(history) if entry != "result")
    tag, _, wanted = history[asked].partition(" calls: ")
    done = len(history) - 1 - asked
    shares = wanted.split()
    if len(shares) > 1:
        if done:
            return wire.Turn("done")
        tasks = {m: f"{tag}.{m} calls: {k}" for m, k in zip(MEMBERS, shares, strict=True)}
        return wire.Turn(
            None,
            [(call_id(), DELEGATE, {"member_id": m, "task": t}) for m, t in tasks.items()],
        )
    if done < int(wanted):
        return wire.Turn(None, [(call_id(), "visit", {"step": f"{tag}-{done}"})])
    return wire.Turn("done")


def call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def team_message(tag: str) -> str:
    return f"{tag} calls: {' '.join(map(str, SHARES))}"


def executions(record: Path) -> list[tuple[str, int, float]]:
    """The member tool's executions so far: (step, process id, when)."""
    lines = record.read_text().splitlines() if record.exists() else []
    return [(step, int(pid), float(at)) for step, pid, at in (line.split() for line in lines)]


@contextlib.contextmanager
def serving(database: str, port: int, lease: float) -> Iterator[subprocess.Popen[bytes]]:
    argv = [
        *(sys.executable, "-m", "runpoint.adapters.cli", "serve", "--app", "crews:agents"),
        *("--db", database, "--lease-seconds", str(lease), "--port", str(port)),
    ]
    with server(argv, port, HERE) as process:
        yield process


# -- 1. the cost of a team run beside an agent run -----------------------------------


def cost(database: str, vendor: str, rounds: int) -> dict[str, list[Built]]:
    built: dict[str, list[Built]] = {"team": [], "agent": []}
    with (
        serving(database, 7792, 30.0) as process,
        httpx.Client(base_url="http://127.0.0.1:7792") as http,
    ):
        for r in range(-1, rounds):  # round -1 warms up: first use of the SDK, statements
            team = measure(
                http, process.pid, vendor, "/teams/crew/runs",
                {"message": team_message(f"team{r}"), "stream": "false"},
            )  # fmt: skip
            agent = measure(
                http, process.pid, vendor, "/agents/solo/runs",
                {"message": f"solo{r} calls: {TURNS - 1}", "stream": "false"},
            )  # fmt: skip
            assert team.turns == agent.turns == TURNS, (team.turns, agent.turns)
            if r >= 0:
                built["team"].append(team)
                built["agent"].append(agent)
    return built


def print_cost(label: str, built: dict[str, list[Built]]) -> None:
    def median(kind: str, value: str) -> float:
        return float(statistics.median(getattr(b, value) for b in built[kind]))

    print(f"{label}: team (1 leader + 3 members) beside an agent, {TURNS} model turns each")
    print(f"  {'':<7} {'wall s':>8} {'CPU s':>7} {'CPU/turn ms':>12}")
    for kind in built:
        print(
            f"  {kind:<7} {median(kind, 'wall'):>8.3f} {median(kind, 'cpu'):>7.3f} "
            f"{median(kind, 'cpu_per_turn_ms'):>12.2f}"
        )
    print(
        f"  team / agent: wall {median('team', 'wall') / median('agent', 'wall'):.2f}x, "
        f"CPU per turn {median('team', 'cpu') / median('agent', 'cpu'):.2f}x (target <= 1.2x)"
    )


# -- 2. SIGKILL inside the members' runs ----------------------------------------------


def kill_once(
    database: str, record: Path, lease: float, tag: str, rng: random.Random
) -> dict[str, float]:
    """One team run whose server is killed halfway through its member tool batches (at
    a random moment of the few milliseconds after: right after a call ran, its member
    would always be in doubt)."""
    record.write_text("")
    session = f"session-{tag}"
    with serving(database, 7793, lease) as victim, serving(database, 7794, lease) as standby:
        posted = threading.Thread(target=post_team_run, args=(7793, session, tag), daemon=True)
        posted.start()
        while len(executions(record)) < sum(SHARES) // 2:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.02))
        victim.kill()  # SIGKILL: no cleanup, no last write
        killed_at = time.time()
        victim.wait()
        before = executions(record)
        assert {pid for _, pid, _ in before} == {victim.pid}
        with httpx.Client(base_url="http://127.0.0.1:7794", timeout=60) as http:
            [run] = http.get("/teams/crew/runs", params={"session_id": session}).json()
            in_doubt, extra = settle(http, run["run_id"], session, record)
        completed_at = time.time()
        made = executions(record)
    counts = collections.Counter(step for step, _, _ in made)
    assert set(counts) == {
        f"{tag}.{m}-{i}" for m, k in zip(MEMBERS, SHARES, strict=True) for i in range(k)
    }, sorted(counts.items())
    resumed = min(at for _, pid, at in made if pid == standby.pid)
    return {
        "done at the kill": len({step for step, _, _ in before}),
        "progressing": resumed - killed_at,
        "completed": completed_at - killed_at,
        "ran again": sum(n - 1 for n in counts.values()),
        "in doubt": in_doubt,
        "member runs started over": extra,
    }


def post_team_run(port: int, session: str, tag: str) -> None:
    """The team run's request, to the server that is killed (its answer never comes)."""
    form = {"message": team_message(tag), "stream": "false", "session_id": session}
    with contextlib.suppress(httpx.HTTPError):
        httpx.post(f"http://127.0.0.1:{port}/teams/crew/runs", data=form, timeout=600)


def settle(http: httpx.Client, run_id: str, session: str, record: Path) -> tuple[int, int]:
    """Wait for the team run to complete, deciding its member calls in doubt from the
    tool's record (its result if it ran, else run it): the calls decided, and the member
    runs it has beyond its 3 (started over)."""
    decided = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run = http.get(f"/teams/crew/runs/{run_id}", params={"session_id": session}).json()
        if run["status"] == "COMPLETED":
            return decided, len(run["member_responses"]) - len(MEMBERS)
        if run["status"] == "PAUSED":
            done = {step for step, _, _ in executions(record)}
            waiting = [
                tool
                for member in run["member_responses"]
                if member["status"] == "PAUSED"
                for tool in member["tools"]
                if tool.get("result") is None
            ]
            decisions = [
                t | ({"result": f"{step}: done"} if step in done else {"confirmed": True})
                for t in waiting
                if (step := t["tool_args"]["step"])
            ]
            answer = http.post(
                f"/teams/crew/runs/{run_id}/continue",
                data={"session_id": session, "stream": "false", "tools": json.dumps(decisions)},
            )
            assert answer.status_code == 200, answer.text
            decided += len(decisions)
            continue
        assert run["status"] in ("RUNNING", "PENDING"), run
        time.sleep(0.01)
    raise TimeoutError(f"team run {run_id} did not complete")


def print_kills(label: str, kills: list[dict[str, float]], lease: float) -> None:
    def spread(key: str) -> str:
        values = [k[key] for k in kills]
        return f"median {statistics.median(values):.2f} s, max {max(values):.2f} s"

    print(f"{label}: {len(kills)} SIGKILLs of the server running the team run, lease {lease:g} s")
    print(f"  member tool batches done at the kill: {[int(k['done at the kill']) for k in kills]}")
    print(f"  kill -> a member tool runs again (standby server): {spread('progressing')}")
    print(f"  kill -> team run completed: {spread('completed')}")
    print(f"  member tool calls run again: {int(sum(k['ran again'] for k in kills))} (target 0)")
    print(f"  member runs started over: {int(sum(k['member runs started over'] for k in kills))}")
    print(
        "  member calls in doubt at each kill, decided from the record: "
        f"{[int(k['in doubt']) for k in kills]}"
    )


def main(rounds: int, kills: int, lease: float, backends: list[str]) -> None:
    rng = random.Random(20261205)
    with vendor_server(turns=turn) as vendor, tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "executions.txt"
        os.environ[RECORD] = str(record)
        for label, on_postgres in (("SQLite", False), ("PostgreSQL", True)):
            if label.lower() not in backends:
                continue
            with databases(on_postgres, Path(tmp)) as new:
                built = cost(asyncio.run(new("crews_cost")), vendor, rounds)
                print_cost(label, built)
                results = [
                    kill_once(asyncio.run(new(f"crews_kill_{i}")), record, lease, f"kill{i}", rng)
                    for i in range(kills)
                ]
                print_kills(label, results, lease)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="team and agent runs built")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs per database")
    parser.add_argument("--lease", type=float, default=1.0, help="lease seconds")
    parser.add_argument(
        "--databases", nargs="+", choices=("sqlite", "postgresql"), default=["sqlite", "postgresql"]
    )
    args = parser.parse_args()
    main(args.rounds, args.kills, args.lease, args.databases)
