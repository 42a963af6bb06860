"""The schedule operations over HTTP, in AgentOS's shapes: create, read, change, enable,
disable, trigger (idempotent), the runs fired, bad input named, another team's unseen."""

from __future__ import annotations

import asyncio
from typing import Any

from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import create_app
from runpoint.plugins.demo import agents

from .conftest import bearer

Client = AsyncTestClient[Litestar]
ALPHA, BETA = bearer("alpha-key"), bearer("beta-key")
BODY: dict[str, Any] = {
    "name": "hourly-report",
    "cron_expr": "0 * * * *",
    "timezone": "Europe/Berlin",
    "endpoint": "/agents/travel-agent/runs",
    "payload": {"message": "Paris"},
    "max_retries": 1,
}


async def test_a_schedule_over_http(database: str, keyed_auth: auth.Auth) -> None:
    app = create_app(agents, database=database, auth=keyed_auth)
    async with AsyncTestClient(app) as client:
        made = await client.post("/schedules", json=BODY, headers=ALPHA)
        assert made.status_code == 201, made.text
        schedule = made.json()
        sid = schedule["id"]
        assert schedule["agent_id"] == "travel-agent" and schedule["method"] == "POST"
        assert schedule["next_run_at"] % 3600 == 0 and schedule["enabled"] is True
        assert (await client.get(f"/schedules/{sid}", headers=ALPHA)).json() == schedule
        page = (await client.get("/schedules", headers=ALPHA)).json()
        assert [s["id"] for s in page["data"]] == [sid] and page["meta"]["page"] == 1

        keyed = {"Idempotency-Key": "now-1"} | ALPHA
        fired = await client.post(f"/schedules/{sid}/trigger", headers=keyed)
        again = await client.post(f"/schedules/{sid}/trigger", headers=keyed)
        assert fired.status_code == again.status_code == 200, fired.text
        assert fired.json()["run_id"] == again.json()["run_id"]
        run_id = fired.json()["run_id"]
        fired_run = f"/schedules/{sid}/runs/{run_id}"
        async with asyncio.timeout(20):
            while (got := (await client.get(fired_run, headers=ALPHA)).json())[  # noqa: ASYNC110 (polls as a client would)
                "status"
            ] != "COMPLETED":
                await asyncio.sleep(0.05)
        assert got["trigger"] == "manual" and got["attempt"] == 1 and got["completed_at"]
        runs = (await client.get(f"/schedules/{sid}/runs", headers=ALPHA)).json()
        assert [r["run_id"] for r in runs["data"]] == [run_id]

        changed = await client.patch(
            f"/schedules/{sid}", json={"cron_expr": "*/5 * * * *"}, headers=ALPHA
        )
        assert changed.json()["cron_expr"] == "*/5 * * * *"
        assert changed.json()["next_run_at"] % 300 == 0
        off = (await client.post(f"/schedules/{sid}/disable", headers=ALPHA)).json()
        assert off["enabled"] is False and off["next_run_at"] is None
        refused = await client.post(f"/schedules/{sid}/trigger", headers=ALPHA)
        assert refused.status_code == 409 and "disabled" in refused.json()["detail"]
        on = (await client.post(f"/schedules/{sid}/enable", headers=ALPHA)).json()
        assert on["enabled"] is True and on["next_run_at"]

        # another team: none of it
        assert (await client.get("/schedules", headers=BETA)).json()["data"] == []
        for method, path in (
            ("GET", f"/schedules/{sid}"),
            ("POST", f"/schedules/{sid}/trigger"),
            ("POST", f"/schedules/{sid}/disable"),
            ("GET", f"/schedules/{sid}/runs"),
            ("GET", f"/schedules/{sid}/runs/{run_id}"),
            ("DELETE", f"/schedules/{sid}"),
        ):
            assert (await client.request(method, path, headers=BETA)).status_code == 404

        assert (await client.delete(f"/schedules/{sid}", headers=ALPHA)).status_code == 204
        assert (await client.get(f"/schedules/{sid}", headers=ALPHA)).status_code == 404


async def test_bad_schedules_are_422s_naming_the_field(database: str) -> None:
    async with AsyncTestClient(create_app(agents, database=database)) as client:
        for change, field in (
            ({"cron_expr": "every hour"}, "cron_expr"),
            ({"timezone": "Mars/Base"}, "timezone"),
            ({"endpoint": "/agents/nobody/runs"}, "endpoint"),
            ({"endpoint": "/teams/x/runs"}, "endpoint"),
        ):
            answer = await client.post("/schedules", json=BODY | change)
            assert answer.status_code == 422, (change, answer.text)
            assert field in answer.json()["detail"], answer.json()


async def _settled(client: AsyncTestClient[Any], path: str) -> None:
    async with asyncio.timeout(20):
        while (await client.get(path)).json()["status"] != "COMPLETED":  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def test_a_model_override_starts_every_fired_run_and_is_recorded(database: str) -> None:
    async with AsyncTestClient(create_app(agents, database=database)) as client:
        body = BODY | {"payload": {"message": "Paris", "model": "scripted:echo"}}
        schedule = (await client.post("/schedules", json=body)).json()
        assert schedule["payload"]["model"] == "scripted:echo"
        sid = schedule["id"]
        fired = (await client.post(f"/schedules/{sid}/trigger")).json()
        await _settled(client, f"/schedules/{sid}/runs/{fired['run_id']}")
        run_path = f"/agents/travel-agent/runs/{fired['run_id']}"
        run = (await client.get(run_path, params={"session_id": fired["session_id"]})).json()
        assert run["model"] == "scripted:echo" and run["content"] == "Paris"  # echo's answer

        # a payload without one clears it: the agent's model again
        cleared = await client.patch(f"/schedules/{sid}", json={"payload": {"message": "Oslo"}})
        assert "model" not in cleared.json()["payload"], cleared.text
        fired = (await client.post(f"/schedules/{sid}/trigger")).json()
        await _settled(client, f"/schedules/{sid}/runs/{fired['run_id']}")
        run_path = f"/agents/travel-agent/runs/{fired['run_id']}"
        run = (await client.get(run_path, params={"session_id": fired["session_id"]})).json()
        assert run["model"] == "scripted:demo"

        for bad in ("nobody:gpt", "no-colon"):
            payload = {"message": "Paris", "model": bad}
            for answer in (
                await client.post("/schedules", json=BODY | {"payload": payload}),
                await client.patch(f"/schedules/{sid}", json={"payload": payload}),
            ):
                assert answer.status_code == 422, answer.text
                assert answer.json()["detail"].startswith("payload.model"), answer.json()


async def test_null_clears_what_can_be_cleared_and_absent_is_unchanged(database: str) -> None:
    async with AsyncTestClient(create_app(agents, database=database)) as client:
        payload = {"message": "Paris", "model": "scripted:echo"}
        body = BODY | {"description": "hourly", "payload": payload}
        made = (await client.post("/schedules", json=body)).json()
        path = f"/schedules/{made['id']}"
        kept = (await client.patch(path, json={"max_retries": 2})).json()
        assert kept == made | {"max_retries": 2, "updated_at": kept["updated_at"]}

        cleared = await client.patch(
            path, json={"cron_expr": None, "timezone": None, "description": None}
        )
        assert cleared.status_code == 200, cleared.text
        got = cleared.json()
        assert got["cron_expr"] == "" and got["next_run_at"] is None  # on demand
        assert got["timezone"] == "UTC" and got["description"] is None
        assert got["payload"] == body["payload"] and got["max_retries"] == 2
        again = (await client.patch(path, json={"cron_expr": "0 * * * *"})).json()
        assert again["next_run_at"] % 3600 == 0
        empty = (await client.patch(path, json={"cron_expr": ""})).json()
        assert empty["cron_expr"] == "" and empty["next_run_at"] is None

        for field in ("name", "endpoint", "method", "payload", "timeout_seconds", "missed_ticks"):
            refused = await client.patch(path, json={field: None})
            assert refused.status_code == 422, (field, refused.text)
            assert refused.json()["detail"].startswith(field), refused.json()
        assert (await client.get(path)).json() == empty
