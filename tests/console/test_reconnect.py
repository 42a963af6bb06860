"""The console reconnects a lost stream by itself: the connection of a run's stream breaks
after a few events (the page's fetch is made to fail there, as a network does), the console
joins the run's stream again from the last event it had, and the run opens as if nothing
happened. What it was sent, concatenated, is the run's uninterrupted stream: an agent
run's joined with GET .../events, a team run's with AgentOS's POST .../resume."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from playwright.sync_api import Page, expect

from tests.http import sse

from .conftest import Console
from .test_console import start_run
from .test_teams import start_team_run

KEPT = 5  # events the broken stream gives before it fails
Events = list[sse.Event]

# Wraps the page's fetch: the first run stream it starts fails after KEPT whole events;
# what every stream of a run gave is kept in window.streamed, in order.
BREAK_THE_FIRST_STREAM = """
(() => {
  const fetch = window.fetch;
  let broken = false;
  window.streamed = [];
  window.fetch = async (input, init) => {
    const response = await fetch(input, init);
    const accept = (init && init.headers && init.headers.Accept) || "";
    if (!accept.includes("text/event-stream") || !response.ok) return response;
    const breaks = !broken;
    broken = true;
    const index = window.streamed.push("") - 1;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let text = "";
    const body = new ReadableStream({
      async pull(controller) {
        const { value, done } = await reader.read();
        if (done) return controller.close();
        text += decoder.decode(value, { stream: true });
        const blocks = text.split("\\n\\n");
        if (breaks && blocks.length > KEPT + 1) {
          const kept = blocks.slice(0, KEPT + 1).join("\\n\\n") + "\\n\\n";
          controller.enqueue(encoder.encode(kept.slice(window.streamed[index].length)));
          window.streamed[index] = kept;
          reader.cancel();
          return controller.error(new TypeError("network error"));
        }
        window.streamed[index] = text;
        controller.enqueue(value);
      },
    });
    return new Response(body, { status: response.status, headers: response.headers });
  };
})();
""".replace("KEPT", str(KEPT))


def broken_once(console: Console, start: Callable[[Page], str]) -> tuple[str, Events, Events]:
    """Starts a run with `start` while the first stream breaks after KEPT events: the run's
    id, and the events the console was sent before the break and by its one rejoin (which
    starts with `retry:`, as every stream does)."""
    page = console.page
    page.add_init_script(BREAK_THE_FIRST_STREAM)
    console.open()
    run_id = start(page)
    expect(page.locator("body")).not_to_contain_text("The stream was lost")
    broken, *rejoined = page.evaluate("window.streamed")
    assert len(rejoined) == 1
    before = sse.parse(broken)
    assert len(before) == KEPT
    return run_id, before, sse.parse(rejoined[0])


def test_a_lost_stream_is_joined_again_without_gaps_or_repeats(console: Console) -> None:
    joins: list[str | None] = []
    console.page.on(
        "request",
        lambda r: joins.append(r.headers.get("last-event-id")) if "/events?" in r.url else None,
    )
    run_id, before, after = broken_once(console, start_run)
    assert joins == [str(before[-1].id)]  # once, from the last whole event it had
    whole = httpx.get(
        f"{console.base_url}/agents/travel-agent/runs/{run_id}/events",
        params={"session_id": before[0].data["session_id"], "events": "all"},
    )
    assert [e.text for e in before + after] == [e.text for e in sse.parse(whole.text)]


def test_a_team_runs_lost_stream_is_joined_again_through_resume(console: Console) -> None:
    joins: list[object] = []
    console.page.on(
        "request", lambda r: joins.append(r.post_data_json) if "/resume?" in r.url else None
    )
    run_id, before, after = broken_once(console, start_team_run)
    assert before[0].name == "TeamRunStarted"
    session_id = before[0].data["session_id"]
    # once, after the last whole event it had (AgentOS counts them from 0)
    assert joins == [{"session_id": session_id, "last_event_index": before[-1].id - 1}]
    whole = httpx.post(
        f"{console.base_url}/teams/travel-team/runs/{run_id}/resume",
        params={"events": "all"},
        json={"session_id": session_id},
    )
    assert [e.text for e in before + after] == [e.text for e in sse.parse(whole.text)]
