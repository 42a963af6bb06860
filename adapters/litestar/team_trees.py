"""A team run's tree on the wire (runpoint's own, see openapi.yaml): its timeline with its
members' runs and their checkpoints, a member run's snapshots, and diffs between any two
nodes of team run trees. A member run is addressed through a team run that holds it (its
timeline lists it); through any other it is a 404."""

from __future__ import annotations

import msgspec

from runpoint.core.types import Run
from runpoint.facade import Runpoint
from runpoint.reads import run_trees

from . import diff_wire, teams, wire
from .errors import HttpError
from .handlers import Reply, agent_name, operation


class MemberTimelineOut(msgspec.Struct):
    run_id: str
    agent_id: str
    tool_call_id: str
    parent_run_id: str
    status: str
    forked_from_run_id: str | None
    forked_from_message_index: int | None
    checkpoints: list[wire.CheckpointOut]


class TeamCheckpointOut(wire.CheckpointOut, gc=False):
    members: list[MemberTimelineOut]


class TeamTimelineOut(msgspec.Struct):
    run_id: str
    session_id: str
    checkpoints: list[TeamCheckpointOut]
    edits: list[wire.EditOut]
    members: list[MemberTimelineOut]


def _member_timeline(node: run_trees.MemberTimeline) -> MemberTimelineOut:
    run = node.member.run
    plain = wire.timeline(run, node.checkpoints)
    return MemberTimelineOut(
        run.run_id,
        run.agent_id,
        node.member.tool_call_id,
        run.parent_run_id or "",
        run.status.value,
        run.forked_from_run_id,
        run.forked_from_message_index,
        plain.checkpoints,
    )


def team_timeline(tree: run_trees.TreeTimeline) -> TeamTimelineOut:
    plain = wire.timeline(tree.run, [c for c, _ in tree.checkpoints])
    return TeamTimelineOut(
        tree.run.run_id,
        tree.run.session_id,
        [
            TeamCheckpointOut(
                **msgspec.structs.asdict(out), members=[_member_timeline(m) for m in members]
            )
            for out, (_, members) in zip(plain.checkpoints, tree.checkpoints, strict=True)
        ],
        plain.edits,
        [_member_timeline(m) for m in tree.pending],
    )


async def _team_run(rp: Runpoint, team_id: str, run_id: str, session_id: str | None) -> Run:
    teams.crew(rp, team_id)
    return await rp.queries.run(run_id, session_id=session_id, agent_id=team_id)


async def _member(
    rp: Runpoint, team_id: str, run_id: str, session_id: str | None, member_run_id: str
) -> Run:
    """The member run `member_run_id` of team run `run_id`, else NotFound."""
    team_run = await _team_run(rp, team_id, run_id, session_id)
    found, _ = await run_trees.member(rp.storage, team_run, member_run_id)
    return found.run


@operation
async def get_team_run_checkpoints(
    rp: Runpoint, *, team_id: str, run_id: str, session_id: str
) -> Reply:
    run = await _team_run(rp, team_id, run_id, session_id)
    return team_timeline(await run_trees.timeline(rp.storage, run))


@operation
async def get_team_member_checkpoint_snapshot(
    rp: Runpoint,
    *,
    team_id: str,
    run_id: str,
    member_run_id: str,
    message_index: int,
    session_id: str,
) -> Reply:
    member = await _member(rp, team_id, run_id, session_id, member_run_id)
    return wire.snapshot(await rp.views.at(member, message_index), agent_name(rp, member.agent_id))


@operation
async def get_team_run_diff(
    rp: Runpoint,
    *,
    team_id: str,
    run_id: str,
    session_id: str,
    member_run_id: str | None,
    message_index: int | None,
    other_run_id: str | None,
    other_member_run_id: str | None,
    other_message_index: int | None,
) -> Reply:
    if member_run_id is None:
        base = await _team_run(rp, team_id, run_id, session_id)
    else:
        base = await _member(rp, team_id, run_id, session_id, member_run_id)
    if other_member_run_id is None:
        other = await _team_run(rp, team_id, other_run_id or run_id, None)
    else:
        other = await _member(rp, team_id, other_run_id or run_id, None, other_member_run_id)
    if base.agent_id != other.agent_id:
        raise HttpError(
            400,
            "BAD_REQUEST",
            f"run {base.run_id} is {base.agent_id}'s and run {other.run_id} is "
            f"{other.agent_id}'s: a leader is compared with a leader, a member with itself",
        )
    found = await rp.diff(
        base.run_id,
        message_index=message_index,
        other_run_id=other.run_id,
        other_message_index=other_message_index,
        agent_id=base.agent_id,
    )
    return diff_wire.run_diff(found)
