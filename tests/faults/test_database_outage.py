"""PostgreSQL goes away under load and comes back: `runpoint serve` (the fault test's
`booker` agent) on a PostgreSQL server of the test's own, while clients create background
runs (some with an Idempotency-Key) and stream one.

- stopped as a crash stops it (`pg_ctl stop -m immediate`) and started again: during the
  outage every answer that needs the database is a 503 with Retry-After, never a 500, and
  /ready names the database; afterwards, without a restart of runpoint, /ready is ready
  and background runs are taken from the run queue at once (not after their lease);
- its connections cut mid-transaction by a TCP proxy between runpoint and PostgreSQL;
- a lock held by another session, or a proxy that stops forwarding: no request waits
  longer than a statement's timeout (and a connection's) for its 503.

Either way no run is lost and no side-effecting call is put in doubt or run twice: the
writes a process holds are retried until the database is back (the outage is shorter
than the lease)."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import threading
import time
from collections.abc import Awaitable
from functools import partial
from pathlib import Path

import asyncpg
import httpx
import pytest

from tests import postgres
from tests.faults.test_sigkill import Server

LEASE_SECONDS = 10.0  # longer than any outage here: a run outlives it in its process
# at most, for every run to end: a job whose dequeue was cut before pgqueuer heard of it
# is the lease watch's once the run's offered lease runs out (its next look, a third on)
SETTLE_SECONDS = 2 * LEASE_SECONDS
CITIES = "Paris Tokyo"
# how long the database stays away: a client is refused meanwhile; the lease outlasts it
DOWN_SECONDS = 2.0

pytestmark = pytest.mark.skipif(not postgres.available(), reason="PostgreSQL is not installed")


def started(database: str, counter: Path) -> Server:
    """`runpoint serve` of the booker agent on `database`, its leases LEASE_SECONDS."""
    server = Server(database, counter)
    server.argv[server.argv.index("--lease-seconds") + 1] = str(LEASE_SECONDS)
    server.start()
    return server


# where the clients create runs: of the agent, or of the team whose member books
RUNS = {"agent": "/agents/booker/runs", "team": "/teams/booking-crew/runs"}


class Load:
    """Clients creating background runs (at `runs`) until stopped, counting the answers
    by status."""

    def __init__(self, base_url: str, runs: str = RUNS["agent"]) -> None:
        self.base_url = base_url
        self.path = runs
        self.answers: collections.Counter[int] = collections.Counter()
        self.refusals: list[httpx.Response] = []
        self.runs: dict[str, tuple[str, float]] = {}  # run_id -> (session_id, accepted at)
        self.jobs: dict[str, str] = {}  # run_id -> the job its input names
        self.stop = asyncio.Event()

    async def client(self, n: int, http: httpx.AsyncClient) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            job = f"c{n}-{i}"
            form = {"message": f"{job}: {CITIES}", "stream": "false", "background": "true"}
            keyed = {"Idempotency-Key": job} if i % 2 else {}
            while True:  # a keyed create is sent again until answered, as a client would
                answer = await http.post(self.path, data=form, headers=keyed)
                self.answers[answer.status_code] += 1
                if answer.status_code == 202:
                    body = answer.json()
                    self.runs[body["run_id"]] = (body["session_id"], time.monotonic())
                    self.jobs[body["run_id"]] = job
                    break
                self.refusals.append(answer)
                await asyncio.sleep(0.1)
                if not keyed or self.stop.is_set():
                    break
            await asyncio.sleep(0.02)

    async def state(self, http: httpx.AsyncClient, run_id: str) -> dict[str, object]:
        session_id, _ = self.runs[run_id]
        got = await http.get(f"{self.path}/{run_id}", params={"session_id": session_id})
        assert got.status_code == 200, got.text
        return got.json()  # type: ignore[no-any-return]

    async def settled(self, http: httpx.AsyncClient, seconds: float) -> dict[str, str]:
        """Every run's status once none is in flight (or `seconds` passed)."""
        deadline = time.monotonic() + seconds
        while True:
            statuses = {r: str((await self.state(http, r))["status"]) for r in self.runs}
            done = not {"PENDING", "RUNNING"} & set(statuses.values())
            if done or time.monotonic() > deadline:
                return statuses
            await asyncio.sleep(0.2)


def assert_no_call_in_doubt_or_twice(load: Load, statuses: dict[str, str], counter: Path) -> None:
    """Every accepted run completed, each of its calls run once. (A create refused while
    its run was being accepted may have accepted it: sent without an Idempotency-Key, it
    cannot be told from a new one, and its run's calls run too, once.)"""
    assert set(statuses.values()) == {"COMPLETED"}, collections.Counter(statuses.values())
    bookings = collections.Counter(counter.read_text().splitlines())
    assert [b for b, n in bookings.items() if n > 1] == []
    accepted = {f"{load.jobs[r]} {city}" for r in load.runs for city in CITIES.split()}
    assert accepted <= set(bookings)


@pytest.mark.parametrize("runs", RUNS)
async def test_runs_outlive_postgresql_stopped_and_started_again(
    pg: postgres.TemporaryServer, tmp_path: Path, runs: str
) -> None:
    """Of agents, and of teams: a team's runs stopped inside their member's, in its tool
    batch or between, and at their delegation."""
    counter = tmp_path / "bookings.txt"
    server = started(pg.url, counter)
    try:
        load = Load(server.url, RUNS[runs])
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            clients = [asyncio.create_task(load.client(n, http)) for n in range(4)]
            # under way, calls made (inside a member's run, for a team's)
            while len(load.runs) < 8 or not counter.exists():  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            await asyncio.to_thread(pg.crash)
            while not load.refusals:  # noqa: ASYNC110 (the outage is met)
                await asyncio.sleep(0.05)
            ready = await http.get("/ready")
            assert ready.status_code == 503
            assert ready.json()["checks"]["database"].startswith("the database cannot be reached")
            await asyncio.sleep(DOWN_SECONDS)
            await asyncio.to_thread(pg.start_again)
            back = time.monotonic()
            while (await http.get("/ready")).status_code != 200:
                assert time.monotonic() - back < LEASE_SECONDS, "not ready again"
                await asyncio.sleep(0.1)
            await asyncio.sleep(1)  # runs accepted after the return, to be taken
            load.stop.set()
            await asyncio.gather(*clients)

            assert 500 not in load.answers, load.answers
            assert {a.status_code for a in load.refusals} == {503}, load.answers
            for refusal in load.refusals:
                assert refusal.json()["error_code"] == "DATABASE_UNAVAILABLE"
                assert int(refusal.headers["retry-after"]) > 0
            statuses = await load.settled(http, SETTLE_SECONDS)
            assert_no_call_in_doubt_or_twice(load, statuses, counter)
            # the run queue takes runs again once the database is back: the first accepted
            # after the return ran at once, not when the lease watch took it once its
            # offered lease ran out (LEASE_SECONDS on). (A job taken just as the
            # connection was cut is offered again when its heartbeat is missed.)
            took = []
            for run_id, (_, accepted) in load.runs.items():
                if accepted > back:
                    state = await load.state(http, run_id)
                    took.append(int(state["updated_at"]) - int(state["created_at"]))  # type: ignore[call-overload]
            assert took and min(took) < LEASE_SECONDS - 1, took
    finally:
        server.kill()


class CuttingProxy:
    """A TCP proxy in front of PostgreSQL that can cut every connection through it at
    once, as a network fault does mid-transaction, or stop forwarding (a network that
    drops packets: connections stay open, nothing comes back)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.lock = threading.Lock()
        self.flowing = threading.Event()
        self.flowing.set()
        # cleared: what PostgreSQL answers is held (a commit done, its answer not yet back)
        self.answering = threading.Event()
        self.answering.set()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:  # PostgreSQL is down: refused, as it would be without the proxy
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            for a, b, gates in (
                (client, upstream, (self.flowing,)),
                (upstream, client, (self.flowing, self.answering)),
            ):
                threading.Thread(target=self._pipe, args=(a, b, gates), daemon=True).start()

    def _pipe(
        self, source: socket.socket, sink: socket.socket, gates: tuple[threading.Event, ...]
    ) -> None:
        try:
            while data := source.recv(65536):
                for gate in gates:
                    gate.wait()
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> int:
        """Cut every connection open now; how many there were."""
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for s in pair:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
        return len(pairs)

    def close(self) -> None:
        self.listener.close()
        self.cut()


async def test_runs_outlive_their_connections_cut_mid_transaction(
    pg: postgres.TemporaryServer, tmp_path: Path
) -> None:
    proxy = CuttingProxy(pg.port)
    counter = tmp_path / "bookings.txt"
    server = started(pg.url.replace(f":{pg.port}/", f":{proxy.port}/"), counter)
    try:
        load = Load(server.url)
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
            clients = [asyncio.create_task(load.client(n, http)) for n in range(4)]
            cut = 0
            for _ in range(5):
                await asyncio.sleep(0.3)
                cut += await asyncio.to_thread(proxy.cut)
            await asyncio.sleep(0.5)
            load.stop.set()
            await asyncio.gather(*clients)
            assert cut, "no connection was cut"
            assert 500 not in load.answers, load.answers
            assert {a.status_code for a in load.refusals} <= {503}, load.answers
            statuses = await load.settled(http, SETTLE_SECONDS)
            assert_no_call_in_doubt_or_twice(load, statuses, counter)
    finally:
        server.kill()
        proxy.close()


# the statement timeout the server is given (its URL's command_timeout): a statement
# that gets no answer in time is given up, and its request answered 503
STATEMENT_SECONDS = 1.0
# at most, for such an answer: a connection's 5 s to open (CONNECT_TIMEOUT), a statement's
# timeout and the rollback of its transaction, with room for a busy machine
ANSWER_SECONDS = 15.0


async def answered_in_time(request: Awaitable[httpx.Response], status: int) -> httpx.Response:
    began = time.monotonic()
    answer = await request
    assert answer.status_code == status, answer.text
    assert time.monotonic() - began < ANSWER_SECONDS
    return answer


async def test_a_database_that_stops_answering_holds_no_request_for_ever(
    pg: postgres.TemporaryServer, tmp_path: Path
) -> None:
    """A lock another session holds, then a network that stops forwarding: each request
    that waits on the database is answered 503 once its statement times out, and all is
    well again once the database answers."""
    proxy = CuttingProxy(pg.port)
    through = pg.url.replace(f":{pg.port}/", f":{proxy.port}/")
    server = started(f"{through}?command_timeout={STATEMENT_SECONDS}", tmp_path / "b.txt")
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            form = {"message": "job: Paris", "stream": "false"}
            run = (await answered_in_time(http.post("/agents/booker/runs", data=form), 200)).json()
            path = f"/agents/booker/runs/{run['run_id']}"
            read = partial(http.get, path, params={"session_id": run["session_id"]})
            locker = await asyncpg.connect(pg.url)
            try:
                async with locker.transaction():
                    await locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
                    refused = await answered_in_time(read(), 503)
                    assert refused.json()["error_code"] == "DATABASE_UNAVAILABLE"
            finally:
                await locker.close()
            await answered_in_time(read(), 200)

            proxy.flowing.clear()
            await answered_in_time(read(), 503)
            await answered_in_time(http.post("/agents/booker/runs", data=form), 503)
            ready = await answered_in_time(http.get("/ready"), 503)
            assert "TimeoutError" in ready.json()["checks"]["database"], ready.text
            proxy.flowing.set()
            back = time.monotonic()
            while (await http.get("/ready")).status_code != 200:
                assert time.monotonic() - back < ANSWER_SECONDS, "not ready again"
                await asyncio.sleep(0.2)
            await answered_in_time(read(), 200)
    finally:
        server.kill()
        proxy.flowing.set()
        proxy.close()
