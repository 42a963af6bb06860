"""Event streams a client resumes and joins, from any process: two `runpoint serve` on one
database (SQLite and PostgreSQL), a run executing in one of them, its stream read through
either. What a client gets, however often it drops and wherever it reconnects, concatenated,
is the uninterrupted stream of the run: the same events, each once, in order, byte for byte."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from agno.client import AgentOSClient
from agno.run import team
from agno.run.agent import BaseAgentRunEvent
from agno.utils.http import set_default_async_client

from tests.conftest import BACKENDS, fresh_database
from tests.faults.test_sigkill import Server
from tests.http import sse

APP = "tests.http.streams_app:agents"
KEEPALIVE_SECONDS = 0.2
FOLLOWERS = 100


@pytest.fixture(scope="module", params=BACKENDS)
def shared_database(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with fresh_database(request, tmp_path_factory.mktemp("streams")) as url:
        yield url


@pytest.fixture(scope="module")
def servers(
    shared_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[list[Server]]:
    """Two server processes on the database, holding a run's lease for a second."""
    counter = tmp_path_factory.mktemp("counter") / "unused.txt"
    started = [Server(shared_database, counter, APP) for _ in range(2)]
    for server in started:  # one after the other: the first migrates the database
        server.env["RUNPOINT_KEEPALIVE_SECONDS"] = str(KEEPALIVE_SECONDS)
        server.start()
    yield started
    for server in started:
        if server.process is not None and server.process.poll() is None:
            server.kill()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=2 * FOLLOWERS)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        yield client


class Stream:
    """A stream being read: its text so far, parsed on demand."""

    def __init__(self) -> None:
        self.text = ""
        self.progress = asyncio.Event()

    @property
    def events(self) -> list[sse.Event]:
        return sse.parse(self.text) if self.text else []

    async def read(self, response: httpx.Response, until: int | None = None) -> None:
        """Read until the stream ends, or (to drop it) until it has `until` events."""
        assert response.status_code == 200, (await response.aread()).decode()
        async for chunk in response.aiter_text():
            self.text += chunk
            self.progress.set()
            if until is not None and len(self.events) >= until:
                return

    async def first(self, name: str) -> sse.Event:
        """The stream's first event called `name`, once it came."""
        while True:
            if found := [e for e in self.events if e.name == name]:
                return found[0]
            self.progress.clear()
            await self.progress.wait()


async def create(
    client: httpx.AsyncClient,
    server: Server,
    job: str,
    *,
    stream: Stream | None = None,
    until: int | None = None,
) -> Stream:
    stream = stream or Stream()
    form = {"message": job, "stream": "true"}
    async with client.stream("POST", f"{server.url}/agents/booker/runs?events=all", data=form) as r:
        await stream.read(r, until)
    return stream


async def join(
    client: httpx.AsyncClient,
    server: Server,
    run: dict[str, Any],
    *,
    last_event_id: int | None = None,
    after: int | None = None,
    stream: Stream | None = None,
    until: int | None = None,
    of: str = "agents/booker",
) -> Stream:
    stream = stream or Stream()
    params = {"session_id": run["session_id"], "events": "all"}
    if after is not None:
        params["after"] = str(after)
    headers = {} if last_event_id is None else {"Last-Event-ID": str(last_event_id)}
    url = f"{server.url}/{of}/runs/{run['run_id']}/events"
    async with client.stream("GET", url, params=params, headers=headers) as response:
        await stream.read(response, until)
    return stream


def texts(events: list[sse.Event]) -> list[str]:
    return [e.text for e in events]


async def test_a_client_that_drops_resumes_where_it_was(
    servers: list[Server], client: httpx.AsyncClient
) -> None:
    first, second = servers
    # the stream that started the run, dropped after six events
    start = await create(client, first, "resume: Paris Tokyo Lagos Kyoto", until=6)
    part1 = start.events[:6]
    run = part1[0].data
    # meanwhile, a client that joined at the start through the other process, never dropping
    whole = asyncio.create_task(join(client, second, run))
    # back through the other process with the header, dropped again after four more
    part2 = (await join(client, second, run, last_event_id=part1[-1].id, until=4)).events[:4]
    # back through the first with the query parameter, to the end
    part3 = (await join(client, first, run, after=part2[-1].id)).events
    assert part3[-1].name == "RunCompleted" and part3[-1].data["content"] == "resume: all booked."
    assert "RunCompleted" not in [e.name for e in part1 + part2]  # both dropped mid-run

    uninterrupted = (await whole).events
    assert texts(part1 + part2 + part3) == texts(uninterrupted)
    ids = [e.id for e in uninterrupted]
    assert ids == sorted(set(ids))
    # the run has ended: its stream replays from any point and ends
    replayed = await join(client, first, run)
    assert texts(replayed.events) == texts(uninterrupted)
    tail = await join(client, second, run, last_event_id=ids[-3])
    assert texts(tail.events) == texts(uninterrupted[-2:])
    assert (await join(client, second, run, last_event_id=ids[-1])).events == []


async def test_a_hundred_followers_of_a_run_get_the_same_sequence(
    servers: list[Server], client: httpx.AsyncClient
) -> None:
    executing, following = servers
    accepted = await client.post(
        f"{executing.url}/agents/booker/runs",
        data={"message": "crowd: Paris Tokyo Lagos Kyoto", "stream": "false", "background": "true"},
    )
    assert accepted.status_code == 202, accepted.text
    run = accepted.json()
    streams = await asyncio.gather(*(join(client, following, run) for _ in range(FOLLOWERS)))
    assert all(texts(s.events) == texts(streams[0].events) for s in streams)
    assert [e.name for e in streams[0].events][-1] == "RunCompleted"
    assert texts((await join(client, executing, run)).events) == texts(streams[0].events)


async def test_a_team_runs_stream_with_its_members_is_joined_through_either_process(
    servers: list[Server], client: httpx.AsyncClient
) -> None:
    executing, following = servers
    crew = "teams/booking-crew"
    # Agno's own client starts it, streaming (through this test's httpx client: Agno's
    # shared one would outlive this test's event loop)
    set_default_async_client(client)
    agno = AgentOSClient(base_url=executing.url, timeout=60).run_team_stream(
        "booking-crew", "crew: Paris Tokyo Lagos"
    )
    first = await anext(agno)
    assert isinstance(first, team.RunStartedEvent)
    run = {"run_id": first.run_id, "session_id": first.session_id}
    whole = asyncio.create_task(join(client, following, run, of=crew))
    received = [first, *[e async for e in agno]]
    members = [e for e in received if isinstance(e, BaseAgentRunEvent)]
    assert members[0].event == "RunStarted" and members[-1].event == "RunCompleted"
    assert {(e.agent_id, e.parent_run_id) for e in members} == {("booker", first.run_id)}
    assert [e.content for e in members if e.event == "RunCompleted"] == ["crew: all booked."]

    uninterrupted = (await whole).events  # joined live through the other process
    agno_names = [
        e.name for e in uninterrupted if e.name not in ("CheckpointCreated", "ToolCallDelta")
    ]
    assert agno_names == [e.event for e in received]
    # resumed from inside the member's run, through each process
    middle = next(e for e in uninterrupted if e.name == "ToolCallCompleted").id
    rest = texts([e for e in uninterrupted if e.id > middle])
    for server in servers:
        tail = await join(client, server, run, last_event_id=middle, of=crew)
        assert texts(tail.events) == rest


async def test_a_run_whose_server_is_killed_streams_on_through_the_survivor(
    servers: list[Server], client: httpx.AsyncClient
) -> None:
    doomed, survivor = servers
    stream, follower = Stream(), Stream()
    job = "killed: Paris Tokyo Lagos Kyoto"
    starting = asyncio.create_task(create(client, doomed, job, stream=stream))
    run = (await stream.first("RunStarted")).data
    joined = asyncio.create_task(join(client, survivor, run, stream=follower))
    await follower.first("ToolCallCompleted")  # mid-run, its first batch done
    doomed.kill()  # for good: this is the module's last test (of each database)
    with pytest.raises(httpx.HTTPError):
        await starting
    # the survivor resumes the run once its lease runs out (a second), the follower on
    async with asyncio.timeout(30):
        await joined
    events = follower.events
    names = [e.name for e in events]
    assert names[0] == "RunStarted" and names[-1] == "RunCompleted"
    assert "RunContinued" in names  # the survivor's execution
    ids = [e.id for e in events]
    assert ids == sorted(set(ids))  # every event once, in order
    assert texts((await join(client, survivor, run)).events) == texts(events)
    assert ": keep-alive\n\n" in follower.text  # while nobody executed the run
