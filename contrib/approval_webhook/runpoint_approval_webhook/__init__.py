"""An example runpoint plugin: each approval a paused run asks for (the hook
`runpoint_approval_requested`) is posted, as JSON, to a webhook that tells people (a chat
channel's incoming webhook, a pager).

Installed, it posts to the URL in RUNPOINT_APPROVAL_WEBHOOK_URL (nothing if unset); or
register `ApprovalWebhook(url)` with the `PluginHost`. The post goes off the run's path,
in its own task: a slow or failing webhook never holds a run up (a failure is logged).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import httpx
import msgspec

from runpoint import hookimpl
from runpoint.core.types import Approval, Run

URL_ENV = "RUNPOINT_APPROVAL_WEBHOOK_URL"
log = logging.getLogger("runpoint.approval_webhook")


class ApprovalWebhook:
    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self.timeout = timeout
        self.sending: set[asyncio.Task[None]] = set()

    @hookimpl
    def runpoint_approval_requested(self, approval: Approval, run: Run) -> None:
        task = asyncio.get_running_loop().create_task(self.post(body(approval)))
        self.sending.add(task)  # held until sent: asyncio keeps only weak references
        task.add_done_callback(self.sending.discard)

    async def post(self, payload: dict[str, Any]) -> None:
        try:
            async with httpx.AsyncClient(timeout=self.timeout) as client:
                (await client.post(self.url, json=payload)).raise_for_status()
        except httpx.HTTPError as exc:
            log.warning("approval %s: webhook %s failed: %r", payload["id"], self.url, exc)


def body(approval: Approval) -> dict[str, Any]:
    """What the webhook is sent: the approval, and the path that decides it."""
    sent: dict[str, Any] = msgspec.to_builtins(approval)
    return sent | {"status": approval.status, "resolve": f"/approvals/{approval.id}/resolve"}


_installed: dict[str, ApprovalWebhook] = {}


@hookimpl
def runpoint_approval_requested(approval: Approval, run: Run) -> None:
    if url := os.environ.get(URL_ENV):
        hook = _installed.get(url) or _installed.setdefault(url, ApprovalWebhook(url))
        hook.runpoint_approval_requested(approval=approval, run=run)
