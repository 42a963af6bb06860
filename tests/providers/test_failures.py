"""Vendor failures after the SDK's retries end the run ERROR with the error recorded and
its checkpoints kept; continue from end then completes the same run."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun
from tests.conftest import OpenRunpoint
from tests.providers import wire
from tests.providers.conftest import Api, travel_agent
from tests.providers.loopback import Reply
from tests.providers.wire import Turn

pytestmark = pytest.mark.memory  # storage is not the subject here

RETRIES = 1
FIRST = Turn("Looking up Paris.", [("call_1", "get_population", {"city": "Paris"})])
SECOND = Turn(None, [("call_2", "get_population", {"city": "Tokyo"})])
LAST = Turn("Paris has 2.1M people.")

# failure kind -> (how the vendor fails, whether the SDK retries it, what the run records)
FAILURES: dict[str, tuple[Callable[[Api], Reply], bool, str]] = {
    "rate-limit": (
        lambda api: wire.error(api.provider, 429, "Rate limit reached"),
        True,
        "RateLimitError",
    ),
    "server-error": (
        lambda api: wire.error(api.provider, 500, "The server had an error"),
        True,
        "InternalServerError",
    ),
    "timeout": (lambda api: Reply(delay=1.0), True, "APITimeoutError"),
    "cut-off-stream": (
        lambda api: wire.cut_off(api.reply(SECOND, stream=True)),
        False,
        "MalformedResponse",
    ),
    "malformed-body": (
        lambda api: Reply(raw=b"<html>502 Bad Gateway</html>"),
        False,
        "MalformedResponse",
    ),
}


@pytest.mark.parametrize("kind", FAILURES)
async def test_a_failed_turn_ends_the_run_and_continue_resumes_it(
    api: Api, kind: str, open_runpoint: OpenRunpoint
) -> None:
    failure, retried, error = FAILURES[kind]
    streaming = kind != "malformed-body"
    # a short timeout only where it is the failure: under load it would fail the others
    timeout = 0.25 if kind == "timeout" else 10.0
    model = api.model(max_retries=RETRIES, timeout=timeout, streaming=streaming)
    runpoint = await open_runpoint([travel_agent(model)])
    attempts = RETRIES + 1 if retried else 1
    api.server.play(FIRST, *[failure(api)] * attempts)

    # watched, or the vendor call would not be streamed
    handle = await runpoint.create_run(
        CreateRun(agent_id="travel", message="Population of Paris?"), stream=streaming
    )
    run = await handle.result()

    assert run.status is RunStatus.ERROR
    assert run.error is not None and run.error.startswith(error), run.error
    assert len(api.server.requests) == 1 + attempts
    detail = await runpoint.get_run(run.run_id)
    assert [m.role for m in detail.messages] == ["user", "assistant", "tool"]
    _, checkpoints = await runpoint.timeline(run.run_id)
    # the batch's checkpoint, as announced: the end at its index is the run's status
    assert [(c.message_index, c.status) for c in checkpoints] == [(3, RunStatus.RUNNING)]

    api.server.play(LAST)
    resumed = await (await runpoint.continue_run(ContinueRun(run_id=run.run_id))).result()

    assert resumed.run_id == run.run_id
    assert resumed.status is RunStatus.COMPLETED, resumed.error
    assert resumed.error is None
    assert resumed.content == "Paris has 2.1M people."
    detail = await runpoint.get_run(run.run_id)
    assert [m.role for m in detail.messages] == ["user", "assistant", "tool", "assistant"]
    assert [t.result for t in detail.tools] == ["2.1M"]  # the batch did not run again
    _, checkpoints = await runpoint.timeline(run.run_id)
    assert [(c.message_index, c.status) for c in checkpoints] == [
        (3, RunStatus.RUNNING),
        (4, RunStatus.COMPLETED),
    ]
    assert "2.1M" in str(api.server.requests[-1].body)  # the resumed turn saw the result


# a single vendor call's answer is decoded by runpoint (plugins/vendor_replies), its errors
# by the SDK: failure kind -> (how the vendor fails, what the run records, and says)
SINGLE_CALL_FAILURES: dict[str, tuple[Callable[[Api], Reply], str, str]] = {
    "rate-limit": (FAILURES["rate-limit"][0], "RateLimitError", "Rate limit reached"),
    "bad-request": (
        lambda api: wire.error(api.provider, 400, "The prompt is too long"),
        "BadRequestError",
        "The prompt is too long",
    ),
    "another-shape": (
        lambda api: Reply(body={"usage": "unknown"}),
        "MalformedResponse",
        "usage",
    ),
}


@pytest.mark.parametrize("kind", SINGLE_CALL_FAILURES)
async def test_a_single_calls_failure_is_the_sdks_error_or_a_malformed_response(
    api: Api, kind: str, open_runpoint: OpenRunpoint
) -> None:
    failure, error, words = SINGLE_CALL_FAILURES[kind]
    model = api.model(max_retries=0, streaming=False)
    runpoint = await open_runpoint([travel_agent(model)])
    api.server.play(failure(api))

    handle = await runpoint.create_run(CreateRun(agent_id="travel", message="Population?"))
    run = await handle.result()

    assert run.status is RunStatus.ERROR
    assert run.error is not None and run.error.startswith(error), run.error
    assert words in run.error
