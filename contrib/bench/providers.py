"""Provider benchmark: runs of 10, 100 and 1,000 messages through each real provider (the
official SDK) against a zero-latency vendor server, and a continue from the middle of the
largest run.

    .venv/bin/python contrib/bench/providers.py [--providers openai ...] [--sizes 10 100]
                                                [--stream]

Each run is one user message, then model turns of one tool call each, then a final answer:
a run of n messages has n/2 model turns. The vendor server speaks each vendor's wire format
(tests/providers/wire.py) in a process of its own, so the CPU measured here (this process's)
is runpoint's alone: the SDK, the conversion, the run loop and SQLite. The figure that
matters is CPU per model turn, which should not grow with the transcript's length (target:
4 ms at every size, streamed or not). "trips" counts the calls a run handed to SQLite's
thread (aiosqlite's one way there, each a queue put and two threads woken). What a turn's
CPU goes to, and the figures measured against main, are in the README's Benchmarks
section ("One trip a write", "Fewer trips, and the SDKs' aiohttp").
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

import aiosqlite

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests.providers
from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.runs.executor import RunHandle
from runpoint.seams.agent import Agent, tool
from tests.providers import wire
from tests.providers.caching import ClaudeCache, OpenAICache
from tests.providers.loopback import Reply, Request

PROVIDERS = {"openai": "gpt-5.4", "openai-chat": "gpt-4o", "anthropic": "claude-sonnet-4-6"}
SIZES = (10, 100, 1_000)


@tool(effect="read")
async def echo(value: str) -> str:
    """Return the value (a read: a side effect would add a durable record per call)."""
    return value


# -- the vendor server -------------------------------------------------------------


def conversation(path: str, body: dict[str, Any]) -> list[str]:
    """The request's history as "result" (a tool result) or the text of a user message."""
    if path.endswith("/responses"):
        items = body["input"]
        return [
            "result" if i.get("type") == "function_call_output" else i["content"]
            for i in items
            if i.get("type") == "function_call_output" or i.get("role") == "user"
        ]
    if path.endswith("/chat/completions"):
        return [
            "result" if m["role"] == "tool" else m["content"]
            for m in body["messages"]
            if m["role"] in ("user", "tool")
        ]
    return [
        "result" if b["type"] == "tool_result" else b["text"]
        for m in body["messages"]
        if m["role"] == "user"
        for b in m["content"]
    ]


def next_turn(history: list[str]) -> wire.Turn:
    """The last user message says "calls: k": k tool calls, one a turn, then an answer."""
    asked = max(i for i, entry in enumerate(history) if entry != "result")
    wanted = int(history[asked].removeprefix("calls: "))
    if len(history) - 1 - asked < wanted:
        return wire.Turn(None, [(f"call_{len(history)}", "echo", {"value": "v"})])
    return wire.Turn("done")


# the vendor's prompt caches, which count its usage (tests.providers.caching), when costs.py
# asks for them: else it scripts the counts, since counting costs the vendor about the CPU
# runpoint spends on a turn, which on a busy machine shows in runpoint's
caches: tuple[ClaudeCache, OpenAICache] | None = None
# how the vendor answers a conversation (`next_turn`, or a benchmark's own)
script: Callable[[list[str]], wire.Turn] = next_turn


class Vendor(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps connections open, as vendors do
    disable_nagle_algorithm = True  # or the body, written after the headers, waits ~40 ms
    # requests, request body bytes and seconds spent on them since the last GET /tally
    tally: ClassVar[dict[str, float]] = {"requests": 0, "bytes": 0, "seconds": 0.0}

    def handle(self) -> None:
        with contextlib.suppress(ConnectionError):  # a client killed mid-request (crews.py)
            super().handle()

    def do_GET(self) -> None:
        data = json.dumps(Vendor.tally).encode()
        Vendor.tally = {"requests": 0, "bytes": 0, "seconds": 0.0}
        self.send_response(200)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        began = time.perf_counter()
        self._answer()
        Vendor.tally["requests"] += 1
        Vendor.tally["bytes"] += int(self.headers["content-length"])
        Vendor.tally["seconds"] += time.perf_counter() - began

    def _answer(self) -> None:
        length = int(self.headers["content-length"])
        if len(data := self.rfile.read(length)) < length:
            return  # its client was killed as it sent it
        body = json.loads(data)
        request = Request(self.path, {}, body)
        turn = script(conversation(self.path, body))
        if caches is None:
            turn.usage = (10, 5)
        if self.path.endswith("/messages"):
            self._send(wire.anthropic(turn, request, caches and caches[0]))
        else:
            self._send(wire.openai(turn, request, caches and caches[1]))

    def _send(self, reply: Reply) -> None:
        if reply.events is not None:
            data = b"".join(
                (f"event: {name}\n" if name else "").encode()
                + f"data: {value if isinstance(value, str) else json.dumps(value)}\n\n".encode()
                for name, value in reply.events
            )
            content_type = "text/event-stream"
        else:
            data, content_type = json.dumps(reply.body).encode(), "application/json"
        self.send_response(reply.status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(port: Connection, counting: bool, turns: Callable[[list[str]], wire.Turn]) -> None:
    global caches, script
    caches = (ClaudeCache(), OpenAICache()) if counting else None
    script = turns
    server = ThreadingHTTPServer(("127.0.0.1", 0), Vendor)
    port.send(server.server_address[1])
    server.serve_forever()


# -- the runs ----------------------------------------------------------------------


TRIPS = [0]  # calls handed to SQLite's thread so far
_execute = aiosqlite.Connection._execute


def _counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
    TRIPS[0] += 1
    return _execute(self, fn, *args, **kwargs)  # type: ignore[no-untyped-call]


aiosqlite.Connection._execute = _counted  # type: ignore[method-assign]


@dataclass
class Measured:
    run_id: str
    messages: int
    turns: int
    wall: float  # seconds
    cpu: float  # seconds of this process's CPU
    trips: int  # to SQLite's thread

    @property
    def cpu_per_turn_ms(self) -> float:
        return 1000 * self.cpu / self.turns


async def measured(
    start: Callable[[], Awaitable[RunHandle]], rp: Runpoint, stream: bool
) -> Measured:
    wall, cpu, trips = time.perf_counter(), time.process_time(), TRIPS[0]
    handle = await start()
    if stream:
        async for _ in handle.events():
            pass
    run = await handle.result()
    wall, cpu, trips = time.perf_counter() - wall, time.process_time() - cpu, TRIPS[0] - trips
    assert run.status is RunStatus.COMPLETED, run.error
    detail = await rp.get_run(run.run_id)
    turns = sum(1 for m in detail.messages[run.own_start :] if m.role == "assistant")
    return Measured(run.run_id, run.message_count, turns, wall, cpu, trips)


async def bench(provider: str, sizes: list[int], stream: bool, database: str) -> None:
    async with Runpoint([agent(provider)], database=database) as rp:
        results: dict[int, Measured] = {}
        for size in sizes:
            calls = size // 2 - 1  # 1 user + calls x (assistant + result) + 1 answer
            runs = [
                await measured(
                    partial(
                        rp.create_run,
                        CreateRun(agent_id="bench", message=f"calls: {calls}"),
                        stream=stream,
                    ),
                    rp,
                    stream,
                )
                for _ in range(3 if size <= 100 else 1)
            ]
            results[size] = r = sorted(runs, key=lambda m: m.wall)[len(runs) // 2]
            print(
                f"{provider:<12} {r.messages:>8} {r.turns:>6} {r.wall:>9.3f} "
                f"{r.cpu:>8.3f} {r.cpu_per_turn_ms:>13.2f} {r.trips:>6}",
                flush=True,
            )
        middle = sizes[-1] // 2
        largest = results[sizes[-1]].run_id
        mid = await measured(
            lambda: rp.continue_run(
                ContinueRun(run_id=largest, continue_from=middle, input="calls: 0"), stream=stream
            ),
            rp,
            stream,
        )
        print(
            f"{provider:<12} continue from message {middle:,} of {sizes[-1]:,}: "
            f"{mid.wall:.3f} s wall, {1000 * mid.cpu:.1f} ms CPU ({mid.turns} model turn)"
        )
        small, large = results[sizes[0]], results[sizes[-1]]
        ratio = large.cpu_per_turn_ms / small.cpu_per_turn_ms
        print(
            f"{provider:<12} CPU per turn at {sizes[-1]:,} / at {sizes[0]:,} messages: "
            f"{ratio:.2f}x (target <= 2)\n",
            flush=True,
        )


@contextlib.contextmanager
def vendor_server(
    counting: bool = False, turns: Callable[[list[str]], wire.Turn] = next_turn
) -> Iterator[str]:
    """The vendor server's URL on loopback (in a process of its own), with the SDKs'
    environment (this process's, which the processes it starts inherit) pointed at it;
    `counting`: the vendor counts each request's tokens in its prompt caches. A GET of
    any path answers its tally since the last (requests, bytes received, seconds spent).
    `turns` answers each request's conversation (`conversation`) with the model's turn."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    server = multiprocessing.Process(target=serve, args=(sender, counting, turns), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{receiver.recv()}"
    os.environ |= {
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": f"{url}/v1",
        "ANTHROPIC_API_KEY": "sk-bench",
        "ANTHROPIC_BASE_URL": url,
    }
    try:
        yield url
    finally:
        server.terminate()


def agent(provider: str) -> Agent:
    """An agent of `provider`'s model that answers "calls: k" (`next_turn`)."""
    return Agent(
        id="bench", model=f"{provider}:{PROVIDERS[provider]}", tools=[echo], max_turns=10**6
    )


async def main(providers: list[str], sizes: list[int], stream: bool) -> None:
    print(f"streamed: {stream}; medians of 3 runs up to 100 messages, then one run")
    print(
        f"{'provider':<12} {'messages':>8} {'turns':>6} {'wall s':>9} {'CPU s':>8} "
        f"{'CPU/turn ms':>13} {'trips':>6}"
    )
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        for provider in providers:
            await bench(provider, sizes, stream, f"sqlite:///{tmp}/{provider}.db")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES))
    parser.add_argument("--stream", action="store_true", help="stream each run to a client")
    args = parser.parse_args()
    asyncio.run(main(args.providers, args.sizes, args.stream))
