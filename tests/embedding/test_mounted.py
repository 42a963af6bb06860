"""runpoint mounted at /rp in FastAPI, Starlette, Litestar and Django: the seeds' flows, a
streamed run joined, everything the prefix shows in, the host's own routes; runpoint opens
once and closes once, whether the host runs its lifespan or runpoint starts itself at its
first request (and closes when the event loop ends)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from .flows import host_routes_work, prefix_shows, seed_flows, streamed_run_and_join
from .hosts import HOSTS, PREFIX, mounted

pytestmark = pytest.mark.parametrize("kind", list(HOSTS))


def clients(host: object) -> tuple[httpx.AsyncClient, httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=host)  # type: ignore[arg-type]
    return (
        httpx.AsyncClient(transport=transport, base_url=f"http://test{PREFIX}", timeout=30),
        httpx.AsyncClient(transport=transport, base_url="http://test"),
    )


async def everything(host: object) -> None:
    runpoint, own = clients(host)
    async with runpoint, own:
        await host_routes_work(own)
        await asyncio.gather(seed_flows(runpoint), streamed_run_and_join(runpoint))
        await prefix_shows(runpoint)
        await host_routes_work(own)


def test_started_at_the_first_request_and_closed_at_the_loops_end(
    kind: str, tmp_path: Path
) -> None:
    host, rp, counts = mounted(kind, str(tmp_path / "runpoint.db"), composed=False)

    async def main() -> None:
        await everything(host)
        assert counts == {"open": 1}
        assert rp.lifecycle.started

    asyncio.run(main())  # its end closes the generators left open: runpoint's closer
    assert counts == {"open": 1, "close": 1}
    assert not rp.lifecycle.started


async def test_started_and_closed_by_the_hosts_lifespan(kind: str, tmp_path: Path) -> None:
    host, _, counts = mounted(kind, f"sqlite:///{tmp_path / 'runpoint.db'}", composed=True)
    async with LifespanManager(host):
        assert counts == {"open": 1}  # before any request
        await everything(host)
        assert counts == {"open": 1}
    assert counts == {"open": 1, "close": 1}
