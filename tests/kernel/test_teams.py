"""Teams in the services: whoever acts (`tenancy.acting_as`) sees only its team's sessions
and runs; another team's raise Forbidden, which names what was refused."""

from __future__ import annotations

import pytest

from runpoint.core import tenancy
from runpoint.core.errors import Forbidden
from runpoint.core.tenancy import Principal
from runpoint.facade import ContinueRun, CreateRun, ForkSession
from runpoint.plugins.demo import agents
from tests.conftest import OpenRunpoint

pytestmark = pytest.mark.memory  # storage is not the subject here

ALPHA, BETA = Principal("alpha", "ada"), Principal("beta")


async def test_a_team_sees_its_own_sessions_and_runs_only(open_runpoint: OpenRunpoint) -> None:
    rp = await open_runpoint(agents)
    with tenancy.acting_as(ALPHA):
        run = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))
        ).result()
        fork = await rp.fork_session(ForkSession(session_id=run.session_id))
        continued = await (
            await rp.continue_run(ContinueRun(run_id=run.run_id, input="Tokyo too"))
        ).result()
    assert tenancy.current() == tenancy.OPEN  # acting_as ends with its block
    with tenancy.acting_as(BETA):
        assert await rp.list_sessions() == []
        for look_up in (
            lambda: rp.get_session(run.session_id),
            lambda: rp.get_session(fork.session_id),
            lambda: rp.list_runs(run.session_id),
            lambda: rp.get_run(continued.run_id),
            lambda: rp.timeline(run.run_id),
            lambda: rp.cancel(run.run_id),
            lambda: rp.delete_session(run.session_id),
            lambda: rp.create_run(
                CreateRun(agent_id="travel-agent", message="Lagos", session_id=run.session_id)
            ),
        ):
            with pytest.raises(Forbidden) as refused:
                await look_up()
            assert "belongs to another team" in str(refused.value)
        # what an adapter needs to answer as for a missing one instead (the run dialect)
        with pytest.raises(Forbidden) as refused:
            await rp.get_run(run.run_id)
        assert (refused.value.kind, refused.value.id) == ("run", run.run_id)
    with tenancy.acting_as(ALPHA):
        listed = {s.session_id for s in await rp.list_sessions()}
        assert listed == {run.session_id, fork.session_id}
        assert {r.team_id for r in await rp.list_runs(fork.session_id)} == {"alpha"}
    assert await rp.list_sessions() == []  # the open default team has none of them
