"""The seeds' client flows, unmodified in what they send and read, over real HTTP against
`runpoint serve` (the demo agents on the offline scripted model)."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from tests.http import sse


def test_checkpoint_endpoints_flow(server: str) -> None:
    """Seed 001: create, timeline, snapshot of an interior checkpoint, continue from it."""
    agent_id = "travel-agent"
    with httpx.Client(base_url=server, timeout=30) as client:
        created = client.post(
            f"/agents/{agent_id}/runs",
            data={
                "message": "Compare the populations of Paris, Tokyo, and Lagos in one sentence.",
                "stream": "false",
            },
        )
        assert created.status_code == 200
        run = created.json()
        assert run["status"] == "COMPLETED"
        assert len(run["messages"]) == 8  # user, then (assistant, tool) x 3, answer

        timeline = client.get(
            f"/agents/{agent_id}/runs/{run['run_id']}/checkpoints",
            params={"session_id": run["session_id"]},
        )
        assert timeline.status_code == 200
        body = timeline.json()
        assert (body["run_id"], body["session_id"]) == (run["run_id"], run["session_id"])
        checkpoints = body["checkpoints"]
        assert [c["message_index"] for c in checkpoints] == [3, 5, 7, 8]
        assert [c["reason"] for c in checkpoints] == ["checkpoint"] * 3 + ["end"]
        assert [c["is_latest"] for c in checkpoints] == [False, False, False, True]
        assert all(c["continue_from"] == c["message_index"] for c in checkpoints)
        assert checkpoints[0]["message_role"] == "tool"
        assert checkpoints[0]["message_preview"] == "2.1M"

        interior = [c for c in checkpoints if not c.get("is_latest")]
        target = interior[0]
        snapshot_idx = target["message_index"]
        snap = client.get(
            f"/agents/{agent_id}/runs/{run['run_id']}/checkpoints/{snapshot_idx}",
            params={"session_id": run["session_id"]},
        )
        assert snap.status_code == 200
        payload = snap.json()
        assert payload["checkpoint"]["checkpoint_id"] == target["checkpoint_id"]
        assert payload["message_index"] == payload["requested_message_index"] == 3
        snapshot = payload["snapshot"]
        assert len(snapshot.get("messages") or []) == 3
        assert len(snapshot.get("tools") or []) == 1
        # the run as it was then, not the final run cut short
        assert snapshot["status"] == "RUNNING"
        assert snapshot["content"] == "Looking up Paris."

        cont = client.post(
            f"/agents/{agent_id}/runs/{run['run_id']}/continue",
            data={
                "session_id": run["session_id"],
                "continue_from": str(snapshot_idx),
                "input": "Actually, just tell me about Paris.",
                "stream": "false",
            },
        )
        assert cont.status_code == 200
        continued = cont.json()
        assert continued.get("run_id") != run["run_id"]
        assert continued.get("forked_from_run_id") == run["run_id"]
        assert continued.get("forked_from_message_index") == snapshot_idx
        assert continued["status"] == "COMPLETED"
        new_input = continued["messages"][snapshot_idx]
        assert new_input["role"] == "user"
        assert new_input["content"] == "Actually, just tell me about Paris."


def test_run_demo_flow(server: str) -> None:
    """Seed 002's run_demo, with its fixed session id."""
    agent_id, session_id = "checkpoint-agent", "checkpoint-demo-session"
    with httpx.Client(base_url=server, timeout=120.0) as client:
        run_response = client.post(
            f"/agents/{agent_id}/runs",
            data={
                "message": (
                    "Call get_city_fact for Paris and Kyoto, then compare the two facts "
                    "in one short paragraph."
                ),
                "stream": "false",
                "session_id": session_id,
            },
        )
        run_response.raise_for_status()
        run = run_response.json()
        run_id = run["run_id"]
        assert run["session_id"] == session_id

        checkpoints_response = client.get(
            f"/agents/{agent_id}/runs/{run_id}/checkpoints", params={"session_id": session_id}
        )
        checkpoints_response.raise_for_status()
        checkpoints = checkpoints_response.json()["checkpoints"]
        seen = [(c["message_index"], c["reason"], c["status"]) for c in checkpoints]
        assert seen == [
            (3, "checkpoint", "RUNNING"),
            (5, "checkpoint", "RUNNING"),
            (6, "end", "COMPLETED"),
        ]

        interior = [checkpoint for checkpoint in checkpoints if not checkpoint["is_latest"]]
        message_index = interior[0]["message_index"]
        continue_response = client.post(
            f"/agents/{agent_id}/runs/{run_id}/continue",
            data={
                "session_id": session_id,
                "continue_from": str(message_index),
                "input": "Continue from here, but discuss only Paris.",
                "stream": "false",
            },
        )
        continue_response.raise_for_status()
        continued = continue_response.json()
        assert continued["run_id"] != run_id
        assert continued.get("forked_from_run_id") == run_id
        assert "Paris" in continued.get("content")


def events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    """The (name, payload) of each Server-Sent Event, checking the format as it goes."""
    return [(e.name, e.data) for e in sse.parse(response.text)]


def test_streams_and_paused_tool_decisions(server: str) -> None:
    """Streaming by default; a paused run resumes in place with the person's decision."""
    with httpx.Client(base_url=server, timeout=30) as client:
        created = client.post("/agents/booking-agent/runs", data={"message": "Book Kyoto"})
        assert created.headers["content-type"] == "text/event-stream; charset=utf-8"
        stream = events(created)
        names = [name for name, _ in stream]
        assert names[:2] == ["RunStarted", "ModelRequestStarted"]
        assert names[-1] == "RunPaused"
        paused = stream[-1][1]
        (tool,) = paused["tools"]
        assert tool["tool_name"] == "book_trip"

        assert "CheckpointCreated" not in names  # runpoint's own events: only when asked
        resumed = client.post(
            f"/agents/booking-agent/runs/{paused['run_id']}/continue",
            params={"events": "all"},
            data={
                "session_id": paused["session_id"],
                # Agno's ToolExecution dict shape, as its clients send it
                "tools": msgspec.json.encode([tool | {"confirmed": True}]).decode(),
            },
        )
        stream = events(resumed)
        names = [name for name, _ in stream]
        assert names[0] == "RunContinued"  # no RunStarted, as with Agno
        assert {"ToolCallStarted", "ToolCallCompleted", "CheckpointCreated"} <= set(names)
        assert names[-1] == "RunCompleted"
        assert all(p["run_id"] == paused["run_id"] for _, p in stream)  # resumed in place
        completed = dict(stream)["ToolCallCompleted"]
        assert completed["tool"]["result"] == "Booked a trip to Kyoto."
