"""A client generated from the checked-in openapi.yaml by openapi-python-client, offline,
into a temporary directory, runs a flow against `runpoint serve`: a run created with a
JSON body, its timeline and a snapshot, a continue from it; then the session dialect's
checkpoint, rollback and fork. Every answer parses into the generated client's types."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
from openapi_python_client import generate
from openapi_python_client.config import Config, ConfigFile, MetaType

from runpoint.plugins.sql.packs import WINDOW
from tests.clients.conftest import LONG
from tests.http.conftest import SPEC
from tests.long_runs import SAID, asked, checkpoint_indexes, transcript

PACKAGE = "runpoint_client"
PROMPT = "Compare the populations of Paris, Tokyo, and Lagos in one sentence."


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The generated package, imported from where it was generated."""
    directory = tmp_path_factory.mktemp("generated")
    config = Config.from_sources(
        ConfigFile(package_name_override=PACKAGE, post_hooks=[]),  # no formatter run
        MetaType.NONE,  # the package alone, no project around it
        SPEC,  # a path: nothing is fetched
        "utf-8",
        overwrite=True,
        output_path=directory / PACKAGE,
    )
    problems = generate(config=config)
    assert [(p.header, p.detail) for p in problems] == []
    sys.path.insert(0, str(directory))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(directory))
        for name in [n for n in sys.modules if n == PACKAGE or n.startswith(f"{PACKAGE}.")]:
            del sys.modules[name]


def module(name: str) -> Any:
    return importlib.import_module(f"{PACKAGE}.{name}")


def ok(answer: Any, model: str) -> Any:
    """The parsed answer, which must be the generated model `model` (not an error)."""
    parsed = answer.parsed
    assert type(parsed).__name__ == model, (answer.status_code, answer.content[:300])
    return parsed


def test_a_generated_client_runs_the_seeds_flows(generated: ModuleType, server: str) -> None:
    models = module("models")
    client = generated.Client(base_url=server, timeout=30.0, raise_on_unexpected_status=True)
    agent_id = "travel-agent"

    created = module("api.agents.create_agent_run").sync_detailed(
        agent_id, client=client, body=models.CreateRunRequest(message=PROMPT, stream=False)
    )
    run = ok(created, "Run")
    assert run.status == models.RunStatus.COMPLETED and run.message_count == 8
    ids = {"client": client, "session_id": run.session_id}

    timeline = ok(
        module("api.agents.get_agent_run_checkpoints").sync_detailed(agent_id, run.run_id, **ids),
        "Timeline",
    )
    assert [c.message_index for c in timeline.checkpoints] == [3, 5, 7, 8]
    snapshot = ok(
        module("api.agents.get_agent_run_checkpoint_snapshot").sync_detailed(
            agent_id, run.run_id, 3, **ids
        ),
        "Snapshot",
    )
    assert snapshot.checkpoint.checkpoint_id == timeline.checkpoints[0].checkpoint_id
    assert snapshot.snapshot.status == models.RunStatus.RUNNING
    assert len(snapshot.snapshot.messages) == 3

    body = models.ContinueRunRequest(
        session_id=run.session_id, continue_from=3, input_="Only Paris, please.", stream=False
    )
    continued = ok(
        module("api.agents.continue_agent_run").sync_detailed(
            agent_id, run.run_id, client=client, body=body
        ),
        "Run",
    )
    assert continued.forked_from_run_id == run.run_id
    assert continued.forked_from_message_index == 3
    assert continued.messages[3].content == "Only Paris, please."

    # the session dialect: checkpoint the session, run on, roll back, fork
    session_id = run.session_id
    checkpoints = "api.session_checkpoints"
    envelope = ok(
        module(f"{checkpoints}.create_session_checkpoint").sync_detailed(
            session_id,
            client=client,
            body=models.CreateSessionCheckpointRequest(label="before Lima"),
        ),
        "SessionCheckpointEnvelope",
    )
    checkpoint = envelope.checkpoint
    assert checkpoint.status == models.SessionCheckpointStatus.READY
    later = models.CreateRunRequest(message="And Lima?", stream=False, session_id=session_id)
    ok(
        module("api.agents.create_agent_run").sync_detailed(agent_id, client=client, body=later),
        "Run",
    )
    session_runs = module("api.sessions.get_session_runs")
    assert len(session_runs.sync(session_id, client=client)) == 3

    rolled_back = ok(
        module(f"{checkpoints}.rollback_session_checkpoint").sync_detailed(
            session_id, checkpoint.checkpoint_id, client=client
        ),
        "SessionCheckpointEnvelope",
    )
    assert rolled_back.checkpoint.checkpoint_id == checkpoint.checkpoint_id
    inputs = [r.run_input for r in session_runs.sync(session_id, client=client)]
    assert inputs == [PROMPT, "Only Paris, please."]  # not "And Lima?"

    forks = ok(
        module(f"{checkpoints}.fork_session_at_checkpoint").sync_detailed(
            session_id,
            client=client,
            body=models.ForkSessionRequest(from_checkpoint_id=checkpoint.checkpoint_id, count=2),
        ),
        "SessionForks",
    )
    assert [s.forked_from_session_id for s in forks.sessions] == [session_id] * 2
    for fork in forks.sessions:
        assert len(session_runs.sync(fork.session_id, client=client)) == 2


def test_a_generated_client_reads_continues_and_forks_a_long_run(
    generated: ModuleType, long_server: str
) -> None:
    """A run of 152 messages, two windows packed (tests/long_runs.py): its messages,
    checkpoints, snapshots and events read back, a continue from inside a packed window,
    and its session forked both ways."""
    models, agents = module("models"), "api.agents"
    client = generated.Client(base_url=long_server, timeout=60.0, raise_on_unexpected_status=True)
    body = models.CreateRunRequest(message=LONG, stream=False)
    run = ok(
        module(f"{agents}.create_agent_run").sync_detailed("long", client=client, body=body), "Run"
    )
    said = transcript(LONG)
    assert [(m.role, m.content) for m in run.messages] == said and run.message_count == len(said)
    ids = {"client": client, "session_id": run.session_id}
    timeline = ok(
        module(f"{agents}.get_agent_run_checkpoints").sync_detailed("long", run.run_id, **ids),
        "Timeline",
    )
    assert [c.message_index for c in timeline.checkpoints] == checkpoint_indexes(len(said))
    snapshot = module(f"{agents}.get_agent_run_checkpoint_snapshot")
    for at in (63, 65, 101, 127, 129, len(said)):  # in and at the edges of packs
        got = ok(snapshot.sync_detailed("long", run.run_id, at, **ids), "Snapshot")
        assert got.checkpoint.message_index == at
        assert [m.id for m in got.snapshot.messages] == [m.id for m in run.messages[:at]]

    # the generated operation parses an event stream as one JSON document (docs/http.md):
    # read through its own HTTP client, as its users must
    http, events = client.get_httpx_client(), f"/agents/long/runs/{run.run_id}/events"
    session = {"session_id": run.session_id}
    whole = sse(http.get(events, params=session).content)
    assert [name for _, name, _ in whole][-1] == "RunCompleted"
    results = [d["tool"]["result"] for _, name, d in whole if name == "ToolCallCompleted"]
    assert results == [f"{SAID}t"] * asked(LONG)
    middle = whole[len(whole) // 2][0]  # a reconnecting client's last id
    rest = sse(http.get(events, params=session | {"after": middle}).content)
    assert rest == whole[len(whole) // 2 + 1 :]

    at = 2 * WINDOW - 27  # a checkpoint inside the second window, packed
    body = models.ContinueRunRequest(
        session_id=run.session_id, continue_from=at, input_="1 more", stream=False
    )
    continued = ok(
        module(f"{agents}.continue_agent_run").sync_detailed(
            "long", run.run_id, client=client, body=body
        ),
        "Run",
    )
    assert [m.id for m in continued.messages[:at]] == [m.id for m in run.messages[:at]]
    assert {m.id for m in continued.messages[at:]}.isdisjoint(m.id for m in run.messages)
    assert [(m.role, m.content) for m in continued.messages[at:]] == [
        ("user", "1 more"),
        *transcript("1 more")[1:],
    ]

    session_runs = module("api.sessions.get_session_runs")
    source = [(r.run_id, len(r.messages)) for r in session_runs.sync(run.session_id, client=client)]
    forked = ok(
        module(f"{agents}.fork_agent_session").sync_detailed("long", run.session_id, client=client),
        "ForkedSession",
    )
    copied = session_runs.sync(forked.session_id, client=client)
    assert [len(r.messages) for r in copied] == [n for _, n in source]
    assert [(m.role, m.content) for m in copied[0].messages] == said
    checkpoints = "api.session_checkpoints"
    envelope = ok(
        module(f"{checkpoints}.create_session_checkpoint").sync_detailed(
            run.session_id, client=client, body=models.CreateSessionCheckpointRequest(label="long")
        ),
        "SessionCheckpointEnvelope",
    )
    forks = ok(
        module(f"{checkpoints}.fork_session_at_checkpoint").sync_detailed(
            run.session_id,
            client=client,
            body=models.ForkSessionRequest(
                from_checkpoint_id=envelope.checkpoint.checkpoint_id, count=1
            ),
        ),
        "SessionForks",
    )
    (fork,) = forks.sessions
    copied = session_runs.sync(fork.session_id, client=client)
    assert [len(r.messages) for r in copied] == [n for _, n in source]
    assert [(m.role, m.content) for m in copied[0].messages] == said


def sse(stream: bytes) -> list[tuple[str, str, Any]]:
    """A Server-Sent Events stream's (id, event, data decoded) of each event."""
    found = []
    for block in stream.decode().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            found.append((fields.get("id", ""), fields["event"], json.loads(fields["data"])))
    return found
