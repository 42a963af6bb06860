"""runpoint mounted on a database it cannot reach: its requests are a 503 the client may
retry (never a 500), the host's own routes go on, and the next request tries again."""

from __future__ import annotations

import httpx

from .hosts import HELLO, PREFIX, mounted

UNREACHABLE = "postgresql://runpoint@127.0.0.1:1/runpoint"


async def test_a_database_it_cannot_reach_is_a_503_and_the_host_goes_on() -> None:
    host, rp, counts = mounted("fastapi", UNREACHABLE, composed=False)
    transport = httpx.ASGITransport(app=host)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        for _ in range(2):  # each request tries to start again
            refused = await client.get(f"{PREFIX}/sessions")
            assert refused.status_code == 503
            assert refused.json()["error_code"] == "DATABASE_UNAVAILABLE"
            assert "retry-after" in refused.headers
        assert (await client.get("/hello")).text.strip('"') == HELLO
    assert counts == {"open": 2}
    assert not rp.lifecycle.started
