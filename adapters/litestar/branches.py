"""The operations that compare and multiply a run's futures: diff and fan-out (see
openapi.yaml)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Response

from runpoint.facade import Branch, FanOut, Runpoint

from . import diff_wire, inputs, wire
from .edit_requests import edit_requests
from .handlers import Reply, operation


@operation
async def get_agent_run_diff(
    rp: Runpoint,
    *,
    agent_id: str,
    run_id: str,
    session_id: str,
    message_index: int | None,
    other_run_id: str | None,
    other_message_index: int | None,
) -> Reply:
    found = await rp.diff(
        run_id,
        message_index=message_index,
        other_run_id=other_run_id,
        other_message_index=other_message_index,
        session_id=session_id,
        agent_id=agent_id,
    )
    return diff_wire.run_diff(found)


class FanOutAccepted(msgspec.Struct):
    runs: list[wire.Accepted]


@operation
async def fan_out_agent_run(
    rp: Runpoint,
    *,
    agent_id: str,
    run_id: str,
    session_id: str,
    continue_from: str | int,
    branches: list[dict[str, Any]],
    background: bool,
    idempotency_key: str | None,
) -> Reply:
    request = FanOut(
        run_id=run_id,
        branches=_branches(branches),
        session_id=session_id,
        agent_id=agent_id,
        continue_from=inputs.continue_from(continue_from),
        background=background,
    )
    handles = await rp.fan_out(request, idempotency_key=idempotency_key)
    runs = [wire.Accepted(h.run.run_id, h.run.session_id, h.run.status) for h in handles]
    return Response(
        wire.encode(FanOutAccepted(runs)), status_code=202, media_type="application/json"
    )


def _branches(branches: list[dict[str, Any]]) -> list[Branch]:
    """The branches as the kernel takes them (the document checked their shape)."""
    return [
        Branch(
            input=b.get("input"),
            model=b.get("model"),
            instructions=b.get("instructions"),
            edits=edit_requests(b.get("edits")),
        )
        for b in branches
    ]
