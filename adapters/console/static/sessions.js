// The session panel: the sessions list, and a session's runs as a tree of forks, with the
// form that compares two of them and the button that forks the session.

import { api, isTeam } from "./api.js";
import { compareForm } from "./compare.js";
import { empty, errorBox, fill, h, loading, when } from "./dom.js";
import { $, go, href, node, state } from "./routes.js";
import { renderRunTree, renderSessions, runForest } from "./tree.js";

export async function loadSessions() {
  const box = $("sessions");
  if (!state.sessions) fill(box, loading("Loading sessions…"));
  try {
    state.sessions = (await api.sessions()).data;
  } catch (error) {
    state.sessions = null;
    fill(box, errorBox(error, { retry: loadSessions }));
    return;
  }
  renderSessionList();
}

export function renderSessionList() {
  if (!state.sessions) return;
  fill(
    $("sessions"),
    state.sessions.length
      ? renderSessions(state.sessions, {
          href: (s) => href.session(s.session_id),
          current: state.sessionId,
        })
      : empty("No sessions yet. Start a run above."),
  );
}

export async function showSession(sessionId, runId) {
  state.sessionId = sessionId;
  state.session = null;
  const body = $("session-body");
  if (sessionId === null) {
    $("session-title").textContent = "Runs";
    fill(body, empty("Pick a session, or start a run: its runs appear here as a tree of forks."));
    return;
  }
  $("session-title").textContent = `Session ${sessionId}`;
  fill(body, loading("Loading the session…"));
  try {
    const [session, runs] = await Promise.all([api.session(sessionId), api.sessionRuns(sessionId)]);
    state.session = { session, runs };
  } catch (error) {
    fill(body, errorBox(error, { title: error.status === 404 ? "Unknown session" : null, retry: () => go(location.hash, null, true) }));
    return;
  }
  renderSession(runId);
}

export function renderSession(runId) {
  const { session, runs } = state.session;
  const forkButton = h(
    "button",
    { type: "button", class: "ghost small", onclick: forkSession },
    "Fork session",
  );
  fill(
    $("session-body"),
    h(
      "div",
      { class: "session-head" },
      h(
        "p",
        { class: "meta" },
        `${isTeam(session.agent_id) ? "Team" : "Agent"} ${session.agent_id} · created `,
        when(session.created_at),
        session.forked_from_session_id
          ? [" · fork of ", h("a", { href: href.session(session.forked_from_session_id) }, session.forked_from_session_id)]
          : null,
      ),
      forkButton,
    ),
    // Session checkpoints (list, create with a label, roll back, fork) belong here, beside the
    // run tree, once the session dialect (/v2/agents/sessions/{id}/checkpoints) is served.
    runs.length
      ? h(
          "nav",
          { "aria-label": `Runs of session ${session.session_id}` },
          renderRunTree(runForest(runs), {
            href: (r) => href.run(session.session_id, r.run_id),
            current: runId,
          }),
        )
      : empty("This session has no runs yet."),
    runs.length > 1
      ? compareForm(runs, {
          base: runs[0].run_id,
          other: runs[runs.length - 1].run_id,
          compare: (a, b) => go(href.compare(session.session_id, node(a), node(b)), "run-title"),
        })
      : null,
  );
}

// Two runs of the session side by side, from their common checkpoint.
export function highlightRun(runId) {
  for (const a of document.querySelectorAll("#session-body .tree-node")) {
    const id = a.closest(".tree-item").dataset.runId;
    if (id === runId) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function forkSession(event) {
  const button = event.currentTarget;
  const { session } = state.session;
  button.disabled = true;
  try {
    const forked = await api.forkSession(session.agent_id, session.session_id);
    await loadSessions();
    go(href.session(forked.session_id), "session-title");
  } catch (error) {
    button.after(errorBox(error));
  } finally {
    button.disabled = false;
  }
}
