"""Checks of the optional capabilities: several backends (as several server processes
would open) sharing one store, and text with U+0000 (NUL)."""

from __future__ import annotations

import msgspec

from runpoint.conformance import build
from runpoint.conformance.keys import by, claim
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import Conflict
from runpoint.core.types import (
    Message,
    RunStatus,
    SessionCapture,
    SessionCheckpointStatus,
    ToolCall,
    now,
)
from runpoint.seams.storage import Storage

PROCESSES, NUL = Capability.PROCESSES, Capability.NUL


@check(PROCESSES, backends=2)
async def a_second_backend_reads_what_the_first_wrote(store: Storage, other: Storage) -> None:
    session, run = await build.started(store, build.messages(2))
    await build.append(store, run, build.messages(1, "more"), build.checkpoint(run, 3))
    assert await other.get_session(session.session_id) == await store.get_session(
        session.session_id
    )
    assert await other.get_run(run.run_id) == run
    assert await build.transcript(other, run) == await build.transcript(store, run)
    assert await other.list_checkpoints(run.segments) == await store.list_checkpoints(run.segments)


@check(PROCESSES, backends=2)
async def a_writer_in_another_backend_makes_this_one_stale(store: Storage, other: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    elsewhere = await other.get_run(run.run_id)
    assert elsewhere is not None
    await other.save(elsewhere, [], None)
    try:
        await store.save(run, [], None)
    except Conflict:
        return
    raise AssertionError("two backends both wrote one revision of a run")


@check(PROCESSES, backends=2)
async def locks_and_claims_hold_across_backends(store: Storage, other: Storage) -> None:
    session, _ = await build.started(store, status=RunStatus.RUNNING)
    try:
        await other.lock_session(session.session_id, "maintenance")
    except Conflict:
        pass
    else:
        raise AssertionError("another backend locked a session with a run in flight")
    mine = claim("me")
    assert await store.claim_key(mine, "f", now() + 60) is None
    assert await other.claim_key(by("other", mine), "g", now() + 60) == ("f", None)


TEXT = "nul:\x00. escape:\\u0000."  # a NUL, and JSON's escape of one as mere text


@check(NUL)
async def text_with_nul_is_kept_whole(store: Storage) -> None:
    call = ToolCall("call-1", "echo", {"text": TEXT})
    said = [
        Message(role="user", content=TEXT),
        Message(role="assistant", content=TEXT, tool_calls=[call]),
    ]
    session, run = await build.started(store, said, input=TEXT)
    result = Message(role="tool", content=TEXT, tool_call_id="call-1", tool_args={"text": TEXT})
    mark = build.checkpoint(run, 3)
    mark.message_preview = TEXT
    run = msgspec.structs.replace(run, content=TEXT, error=TEXT)
    await store.save(run, [], None, intents=["call-1"])
    await build.append(store, run, [result], mark)
    await store.record_tool_results(run.run_id, [result])
    assert await store.get_run(run.run_id) == run
    assert await build.transcript(store, run) == [*said, result]
    views = await store.read_views(run.segments, run.message_count)
    assert build.as_json(views) == build.as_json([*said, result])
    [listed] = await store.list_checkpoints(run.segments)
    assert listed.message_preview == TEXT
    assert await store.tool_records(run.run_id, ["call-1"]) == {"call-1": result}
    checkpoint = build.session_checkpoint(session)
    checkpoint.label = TEXT
    await store.add_session_checkpoint(checkpoint)
    ready = msgspec.structs.replace(checkpoint, status=SessionCheckpointStatus.READY, lease=None)
    capture = SessionCapture(session, [run])
    await store.update_session_checkpoint(ready, msgspec.json.encode(capture), "me")
    assert await store.get_session_checkpoint(checkpoint.checkpoint_id) == ready
    assert await store.session_capture(checkpoint.checkpoint_id) == capture
    mine = claim("me")
    await store.claim_key(mine, "f", now() + 60)
    await store.save(run, [], None, answering=mine.answered(TEXT))
    assert await store.claim_key(by("other", mine), "f", now()) == ("f", TEXT)
