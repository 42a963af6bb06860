"""Checks of encryption at rest (optional: `runpoint.seams.storage.Encrypted`). Each backend
is given a recording codec with a keyring of its own (see `suite.encrypted`): it must store
the ciphertext it is given and hand it back unchanged, bound to the same row, keep none of
what it was given in the clear, and refuse a ciphertext moved from another row; what one
backend seals reads back whole through it, and another backend of the same store, without
its key, refuses those rows (`Unreadable`) rather than serving them as if valid."""

from __future__ import annotations

import msgspec

from runpoint.conformance import build
from runpoint.conformance.recording import Recording, in_the_clear
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import Unreadable
from runpoint.core.types import (
    Message,
    Run,
    RunEvent,
    SessionCapture,
    SessionCheckpointStatus,
    ToolCall,
)
from runpoint.seams.storage import Encrypted, ErasesTeams, Storage

ENCRYPTION = Capability.ENCRYPTION
SAID = "what a user typed"


async def _written(store: Storage) -> tuple[Run, str]:
    """A run with every kind of document a user, tool or model wrote, read back whole;
    returns it, and its session checkpoint's id."""
    call = ToolCall("call-1", "look_up", {"topic": SAID})
    said = [Message("user", SAID), Message("assistant", SAID, tool_calls=[call])]
    session, run = await build.started(store, said, input=SAID)
    result = Message("tool", SAID, tool_call_id="call-1", tool_args={"topic": SAID})
    await store.save(run, [], None, intents=["call-1"])
    mark = build.checkpoint(run, 3)
    mark.message_preview = SAID
    run = msgspec.structs.replace(run, content=SAID)
    await build.append(store, run, [result], mark)
    await store.record_tool_results(run.run_id, [result])
    event = RunEvent("RunContent", run.run_id, run.session_id, run.agent_id, data={"t": SAID})
    event.seq = 1
    assert await store.append_events(run, [event])
    assert await store.get_run(run.run_id) == run
    assert await build.transcript(store, run) == [*said, result]
    views = await store.read_views(run.segments, run.message_count)
    assert build.as_json(views) == build.as_json([*said, result])
    [listed] = await store.list_checkpoints(run.segments)
    assert listed.message_preview == SAID
    assert await store.tool_records(run.run_id, ["call-1"]) == {"call-1": result}
    [read] = await store.read_events(run, 0, 10)
    assert read.data == {"t": SAID}
    checkpoint = build.session_checkpoint(session)
    await store.add_session_checkpoint(checkpoint)
    ready = msgspec.structs.replace(checkpoint, status=SessionCheckpointStatus.READY, lease=None)
    capture = SessionCapture(session, [run], {"state": SAID.encode()})
    await store.update_session_checkpoint(ready, msgspec.json.encode(capture), "me")
    assert await store.session_capture(checkpoint.checkpoint_id) == capture
    # a fork reads its source's rows, sealed as its source's
    fork = build.fork(run, 2)
    await store.create_runs([fork])
    assert await build.transcript(store, fork) == said
    return run, checkpoint.checkpoint_id


def _recording(store: Storage) -> Recording:
    assert isinstance(store, Encrypted)
    codec = store.codec
    assert isinstance(codec, Recording), "the backend does not seal with the codec it is given"
    return codec


@check(ENCRYPTION)
async def what_is_stored_is_the_ciphertext_given_and_comes_back_unchanged(
    store: Storage,
) -> None:
    codec = _recording(store)
    await _written(store)
    assert codec.opens, "the backend read back no document through its codec"
    assert not codec.strays, f"opened what the codec never sealed for that row: {codec.strays}"
    kept = in_the_clear(store, SAID.encode(), besides=codec)
    assert not kept, f"what a user typed is kept in the clear at {kept}"


@check(ENCRYPTION)
async def a_ciphertext_moved_from_another_row_is_refused(store: Storage) -> None:
    codec = _recording(store)
    codec.marker = build.fresh("moved").encode()
    said = [Message("user", codec.marker.decode()), Message("assistant", SAID)]
    _, first = await build.started(store, said)
    codec.moving = True  # the second run's message 0 is stored as the first's ciphertext
    _, second = await build.started(store, said)
    codec.moving = False
    try:
        await build.transcript(store, second)
    except Unreadable:
        pass
    else:
        raise AssertionError("a ciphertext moved from another row was served")
    assert await build.transcript(store, first) == said


@check(ENCRYPTION, backends=2)
async def what_is_sealed_reads_back_whole(store: Storage, other: Storage) -> None:
    run, _ = await _written(store)
    assert isinstance(store, Encrypted)
    listed = (await store.reseal(encrypt=False, check=True, batch=10)).problems
    assert not [row for row in listed if run.run_id in row], listed


@check(ENCRYPTION, backends=2)
async def rows_under_a_key_not_held_are_refused(store: Storage, other: Storage) -> None:
    run, checkpoint_id = await _written(store)
    for read in (
        other.get_run(run.run_id),
        other.read_messages(run.segments, run.message_count),
        other.read_views(run.segments, run.message_count),
        other.list_checkpoints(run.segments),
        other.read_events(run, 0, 10),
        other.tool_records(run.run_id, ["call-1"]),
        other.session_capture(checkpoint_id),
    ):
        try:
            await read
        except Unreadable:
            continue
        raise AssertionError("a row sealed under a key the backend lacks was served")
    assert isinstance(other, Encrypted)
    listed = (await other.reseal(encrypt=False, check=True, batch=10)).problems
    # the run's rows, or the key they are sealed under (a team key, wrapped under key-0)
    assert any("under key 'key-0'" in row for row in listed), listed


@check(ENCRYPTION)
async def an_erased_teams_rows_never_open_again(store: Storage) -> None:
    if not isinstance(store, ErasesTeams):  # optional
        return
    team = build.fresh("team")
    ours = build.session(team_id=team)
    run = build.run(ours, message_count=1)
    await store.create_sessions([ours], [run], {run.run_id: [Message("user", SAID)]})
    said = [Message("user", SAID)]
    _, others = await build.started(store, said)
    assert not await store.erase_team(build.fresh("team"))  # nothing of it is stored
    assert await store.erase_team(team)
    for read in (store.get_run(run.run_id), build.transcript(store, run)):
        try:
            await read
        except Unreadable:
            continue
        raise AssertionError("a row sealed under an erased team's key was served")
    while await store.remove_erased(1) is not None:
        pass
    assert await store.get_run(run.run_id) is None
    assert await store.get_session(ours.session_id) is None
    assert await build.transcript(store, others) == said
