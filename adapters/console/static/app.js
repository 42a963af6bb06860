// The console: routes (#/sessions/{id}/runs/{id}/at/{k}), panels, and the streams it starts.
// Every datum comes from the public HTTP API (api.js).

import { api, ApiError, FINAL_EVENTS, isTeam } from "./api.js";
import { compareForm, diffView } from "./compare.js";
import { setUpSignOut } from "./credentials.js";
import { decisionForm } from "./decisions.js";
import { empty, errorBox, fill, h, loading, shortId, statusBadge, when } from "./dom.js";
import { editActions } from "./edits.js";
import { loadInbox } from "./inbox.js";
import { loadMembers, memberRuns } from "./members.js";
import { checkpointLabel, LiveRun, timelineStrip, transcript } from "./transcript.js";
import { lineageText, renderRunTree, renderSessions, runForest } from "./tree.js";

const $ = (id) => document.getElementById(id);

const state = {
  sessions: null, // the sessions list once loaded
  sessionId: null,
  session: null, // {session, runs} once loaded
  run: null, // {run, checkpoints, members} once loaded (members: a team run's, else [])
  at: null, // the selected boundary
  member: null, // the member run (of a team run) whose boundary `at` is, if one is
  live: null, // the LiveRun being streamed
};

// -- routes -----------------------------------------------------------------------------

const href = {
  session: (sessionId) => `#/sessions/${encodeURIComponent(sessionId)}`,
  // a boundary of the run, or of one of its member runs (a team run's)
  run: (sessionId, runId, at = null, member = null) =>
    `${href.session(sessionId)}/runs/${encodeURIComponent(runId)}` +
    `${member === null ? "" : `/members/${encodeURIComponent(member)}`}${at === null ? "" : `/at/${at}`}`,
  compare: (sessionId, a, b) =>
    `${href.session(sessionId)}/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`,
};

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const route = { sessionId: null, runId: null, at: null, member: null, compare: null };
  if (parts[0] === "sessions" && parts[1]) route.sessionId = parts[1];
  if (parts[2] === "runs" && parts[3]) route.runId = parts[3];
  if (parts[2] === "compare" && parts[3] && parts[4]) route.compare = [parts[3], parts[4]];
  let rest = parts.slice(4);
  if (rest[0] === "members" && rest[1]) [route.member, rest] = [rest[1], rest.slice(2)];
  if (rest[0] === "at" && /^\d+$/.test(rest[1] || "")) route.at = Number(rest[1]);
  else route.member = null; // a member run is shown at one of its boundaries only
  return route;
}

let after = {}; // what the next route does besides routing: {focus, reload}

// Navigates to `url`, then focuses the element `focus`; `reload` refetches what is shown.
function go(url, focus, reload = false) {
  after = { focus, reload };
  if (location.hash === url) route();
  else location.hash = url;
}

async function route() {
  const { sessionId, runId, at, member, compare } = parseRoute();
  const { focus, reload } = after;
  after = {};
  state.live = null; // a stream still going on keeps going, but no longer owns the run panel
  if (sessionId !== state.sessionId || reload || !state.session) await showSession(sessionId, runId);
  else highlightRun(runId);
  if (compare !== null) {
    state.run = null;
    await showCompare(sessionId, ...compare);
  } else if (runId === null) {
    state.run = null;
    showNoRun(sessionId);
  } else if (reload || state.run?.run.run_id !== runId) {
    await showRun(sessionId, runId);
  }
  await select(at, member);
  renderSessionList();
  if (focus) $(focus)?.focus();
}

// -- sessions ---------------------------------------------------------------------------

async function loadSessions() {
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

function renderSessionList() {
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

async function showSession(sessionId, runId) {
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

function renderSession(runId) {
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
          compare: (a, b) => go(href.compare(session.session_id, a, b), "run-title"),
        })
      : null,
  );
}

// Two runs of the session side by side, from their common checkpoint.
async function showCompare(sessionId, a, b) {
  $("run-title").textContent = `Compare ${shortId(a)} with ${shortId(b)}`;
  showNoSnapshot();
  const body = fill($("run-body"), loading("Comparing…"));
  const agentId = agentOf(sessionId, a);
  try {
    const diff = await api.diff(agentId, a, sessionId, b);
    fill(body, diffView(diff, { href: (runId) => href.run(sessionId, runId) }));
  } catch (error) {
    fill(body, errorBox(error, { retry: () => go(location.hash, null, true) }));
  }
}

function highlightRun(runId) {
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

// -- a run ------------------------------------------------------------------------------

function showNoRun(sessionId) {
  $("run-title").textContent = "Run";
  fill(
    $("run-body"),
    empty(sessionId ? "Select a run in the tree to read its transcript." : "No run selected."),
  );
  showNoSnapshot();
}

function agentOf(sessionId, runId) {
  const listed = state.session?.runs.find((r) => r.run_id === runId);
  return listed?.agent_id || state.session?.session.agent_id;
}

async function showRun(sessionId, runId) {
  state.run = null;
  $("run-title").textContent = `Run ${shortId(runId)}`;
  const body = $("run-body");
  const agentId = agentOf(sessionId, runId);
  if (!agentId) {
    fill(body, errorBox(new ApiError(404, `There is no session ${sessionId}, so no run ${runId} in it.`, "NOT_FOUND", null), { title: "Unknown run" }));
    showNoSnapshot();
    return;
  }
  fill(body, loading("Loading the run…"));
  try {
    const [run, timeline] = await Promise.all([
      api.run(agentId, runId, sessionId),
      api.timeline(agentId, runId, sessionId),
    ]);
    const members = isTeam(agentId) ? await loadMembers(run, timeline) : [];
    state.run = { run, checkpoints: timeline.checkpoints, members };
  } catch (error) {
    fill(body, errorBox(error, { title: error.status === 404 ? "Unknown run" : null, retry: () => go(location.hash, null, true) }));
    showNoSnapshot();
    return;
  }
  renderRun();
}

function lineage(run) {
  const links = [];
  if (run.regenerated_from) {
    links.push(["Regenerated from run ", h("a", { href: href.run(run.session_id, run.regenerated_from) }, shortId(run.regenerated_from))]);
  } else if (run.forked_from_session_id) {
    links.push([
      "Copied by a session fork from run ",
      h("a", { href: href.run(run.forked_from_session_id, run.forked_from_run_id) }, shortId(run.forked_from_run_id)),
      ` of session ${run.forked_from_session_id}`,
    ]);
  } else if (run.forked_from_run_id) {
    const at = run.forked_from_message_index;
    links.push([
      "Forked from run ",
      h("a", { href: href.run(run.session_id, run.forked_from_run_id, at) }, shortId(run.forked_from_run_id)),
      ` at message ${at}`,
    ]);
  }
  return links.length ? h("p", { class: "lineage-line" }, h("span", { class: "lineage-icon", "aria-hidden": "true" }, "↳ "), links) : null;
}

function renderRun() {
  const { run, checkpoints, members } = state.run;
  const selected = state.member === null ? state.at : null;
  const selectAt = (k, member = null) => go(href.run(run.session_id, run.run_id, k, member), "inspector-title");
  const waits = (t) => t.result === null && (t.requires_confirmation || t.in_doubt);
  // a team run pauses for the calls its member runs wait on
  const deciding = [run, ...members.map((m) => m.run)]
    .flatMap((r) => (r?.status === "PAUSED" ? (r.tools || []).filter(waits) : []));
  // continue the run as a person says: with decisions in place, or with edits in a fork
  const resume = (body, { title, submit, errors }) =>
    stream({ title, events: api.continueRun(run.agent_id, run.run_id, body), submit, errors });
  const edits = selected === null ? null : editActions(run, selected, { fork: resume });
  const nested = memberRuns(run, members, {
    selected: state.member === null ? null : { memberRunId: state.member, at: state.at },
    select: (member, k) => selectAt(k, member.run_id),
    fork: resume,
  });
  fill(
    $("run-title"),
    `Run ${shortId(run.run_id)} `,
    statusBadge(run.status),
  );
  fill(
    $("run-body"),
    lineage(run),
    h(
      "dl",
      { class: "facts" },
      fact("Input", run.run_input || "—", "wide"),
      fact(run.team_id ? "Team" : "Agent", run.agent_id),
      fact("Model", run.model || "—"),
      fact("Started", when(run.created_at)),
      fact("Messages", String(run.message_count)),
      fact("Tokens", `${run.metrics.input_tokens} in · ${run.metrics.output_tokens} out`),
    ),
    run.error ? h("div", { class: "state error" }, h("p", { class: "error-title" }, "The run failed"), h("p", {}, run.error)) : null,
    deciding.length
      ? [
          h("p", { class: "note" }, `Paused: ${deciding.map((t) => t.tool_name).join(", ")} waits for a person's decision.`),
          decisionForm(run, deciding, { send: resume }),
        ]
      : null,
    h("h3", { class: "section-title" }, "Checkpoints"),
    checkpoints.length
      ? timelineStrip(run, checkpoints, { selected, select: selectAt })
      : empty("This run has no checkpoints yet."),
    h("h3", { class: "section-title" }, "Transcript"),
    run.messages?.length
      ? transcript(run, checkpoints, {
          selected,
          select: selectAt,
          actions: (i) => [...(edits ? edits(i) : []), ...nested(i)],
        })
      : empty("No messages yet."),
  );
}

function fact(term, value, className = null) {
  return h("div", { class: className }, h("dt", {}, term), h("dd", {}, value));
}

// -- a snapshot, and continue from here -------------------------------------------------

function showNoSnapshot() {
  $("inspector-title").textContent = "Snapshot";
  fill(
    $("inspector-body"),
    empty(
      !state.run
        ? "A run's snapshots appear here."
        : state.run.checkpoints.length
          ? "Select a checkpoint to see the run as it was there, and to continue from it."
          : "This run has no checkpoint to look at or continue from yet.",
    ),
  );
}

// Selects boundary `at` of the run, or of its member run `member` (a team run's).
async function select(at, member = null) {
  if (state.at !== at || state.member !== member) {
    [state.at, state.member] = [at, member];
    if (state.run) renderRun();
  }
  if (!state.run) return;
  if (at === null) {
    showNoSnapshot();
    return;
  }
  const { run, members } = state.run;
  // one the timeline does not list is the server's to refuse
  const owner = member === null ? null : members.find((m) => m.run_id === member) || { run_id: member, agent_id: shortId(member) };
  $("inspector-title").textContent = snapshotTitle(at, owner);
  const body = fill($("inspector-body"), loading("Loading the snapshot…"));
  let snap;
  try {
    snap = owner
      ? await api.memberSnapshot(run.team_id, run.run_id, owner.run_id, at, run.session_id)
      : await api.snapshot(run.agent_id, run.run_id, run.session_id, at);
  } catch (error) {
    fill(body, errorBox(error, { retry: () => select(at, member) }));
    return;
  }
  if (state.at !== at || state.member !== member || state.run?.run.run_id !== run.run_id) return; // moved on meanwhile
  renderSnapshot(snap, owner);
}

const snapshotTitle = (at, owner) => `Snapshot${owner ? ` of ${owner.agent_id}'s run` : ""} at message ${at}`;

// A snapshot of the run, or of its member run `owner` (a team run's).
function renderSnapshot(snap, owner) {
  const { run } = state.run;
  const s = snap.snapshot;
  const cp = snap.checkpoint;
  $("inspector-title").textContent = snapshotTitle(snap.message_index, owner);
  const form = continueForm(run, snap.message_index, owner);
  fill(
    $("inspector-body"),
    snap.message_index !== snap.requested_message_index
      ? h("p", { class: "note" }, `Asked for ${snap.requested_message_index}; moved to ${snap.message_index} so that no tool call loses its result.`)
      : null,
    h(
      "dl",
      { class: "facts" },
      fact("Status then", statusBadge(s.status)),
      fact("Messages kept", String(s.message_count)),
      fact("Tokens then", `${s.metrics.input_tokens} in · ${s.metrics.output_tokens} out`),
      fact("Tool calls then", String((s.tools || []).length)),
      cp ? fact("Checkpoint", `${cp.reason} · ${cp.policy}`) : fact("Checkpoint", "none at this boundary"),
      cp ? fact("Written", when(cp.created_at)) : null,
    ),
    h("h3", { class: "section-title" }, "Content then"),
    s.content ? h("blockquote", { class: "snapshot-content" }, s.content) : empty("No content yet."),
    cp?.message_preview
      ? h("p", { class: "meta" }, `Last message (${cp.message_role}): `, h("q", {}, cp.message_preview))
      : null,
    form,
    h("p", { class: "meta" }, "Or change what came before it: the transcript's Edit buttons make a new run forked here with your edit."),
  );
}

// Continue the run from boundary `at`, or from boundary `at` of its member run `owner`: a
// new team run then holds the leader's messages up to that member's delegation, and a
// fork of the member's run answers it.
function continueForm(run, at, owner) {
  const errors = h("div", { class: "form-errors" });
  const input = h("textarea", { id: "continue-input", name: "input", rows: "3", required: true, placeholder: "e.g. Only Paris, please." });
  const model = h("input", { id: "continue-model", name: "model", autocomplete: "off", spellcheck: "false", placeholder: (owner ? owner.run?.model : run.model) || "" });
  const submit = h("button", { type: "submit", class: "primary" }, "Continue from here");
  const whose = owner ? `${owner.agent_id}'s ` : "";
  const form = h(
    "form",
    { class: "stack continue-form", "aria-labelledby": "continue-title" },
    h("h3", { id: "continue-title", class: "section-title" }, `Continue ${owner ? `${whose}run ` : ""}from message ${at}`),
    h(
      "p",
      { class: "meta" },
      owner
        ? `Makes a new team run in which ${whose}run goes on from here, and the leader then from its new answer; this run stays as it is.`
        : at < run.message_count
          ? "Makes a new run forked here; this run stays as it is."
          : "Continues after the end of this run.",
    ),
    h("label", { for: "continue-input" }, "New input"),
    input,
    h("label", { for: "continue-model" }, "Model ", h("span", { class: "hint" }, "(optional; blank keeps the run's model)")),
    model,
    submit,
    errors,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { session_id: run.session_id, continue_from: at, input: input.value };
    if (owner) body.member_run_id = owner.run_id;
    if (model.value.trim()) body.model = model.value.trim();
    await stream({
      title: `Continuing run ${shortId(run.run_id)} from ${whose}message ${at}`,
      events: api.continueRun(run.agent_id, run.run_id, body),
      submit,
      errors,
    });
  });
  return form;
}

// -- streams ----------------------------------------------------------------------------

// Starts a stream; a refused request shows its error by the form and changes nothing else.
// Once events come, the run panel shows them live, the tree gains the new run, and when the
// run stops the console opens it. A stream that ends before the run did is a lost stream.
async function stream({ title, events, submit, errors }) {
  submit.disabled = true;
  fill(errors);
  const iterator = events[Symbol.asyncIterator]();
  let first;
  try {
    first = await iterator.next();
  } catch (error) {
    fill(errors, errorBox(error, { title: "Not started" }));
    submit.disabled = false;
    return;
  }
  const live = new LiveRun(title);
  state.live = live;
  state.run = null;
  $("run-title").textContent = "Live run";
  fill($("run-body"), live.el);
  $("run-title").focus();
  let runId = null;
  let sessionId = null;
  let last = null;
  try {
    for (let step = first; !step.done; step = await iterator.next()) {
      const message = step.value;
      live.event(message);
      if (runId === null && message.data.run_id) {
        runId = message.data.run_id;
        sessionId = message.data.session_id;
        $("run-title").textContent = `Live run ${shortId(runId)}`;
        if (state.live === live) await refreshTree(sessionId, runId);
      }
      if (message.data.run_id === runId) last = message.event; // not a member run's
    }
  } catch {
    // a network failure mid-stream: reported below as a lost stream
  } finally {
    submit.disabled = false;
  }
  const mine = state.live === live;
  if (FINAL_EVENTS.has(last)) {
    await Promise.all([loadSessions(), refreshInbox()]);
    if (mine) go(href.run(sessionId, runId), "run-title", true);
    return;
  }
  live.finish("The stream was lost.");
  if (mine) {
    $("run-body").append(
      h(
        "div",
        { class: "state error", role: "alert" },
        h("p", { class: "error-title" }, "The stream was lost"),
        h("p", {}, "The connection closed before the run finished. The run may still be going on the server."),
        runId ? h("a", { class: "button", href: href.run(sessionId, runId) }, "Open the run") : null,
      ),
    );
  }
}

async function refreshTree(sessionId, runId) {
  if (sessionId !== state.sessionId) {
    await loadSessions();
  }
  state.sessionId = sessionId;
  try {
    const [session, runs] = await Promise.all([api.session(sessionId), api.sessionRuns(sessionId)]);
    state.session = { session, runs };
    $("session-title").textContent = `Session ${sessionId}`;
    renderSession(runId);
    renderSessionList();
  } catch {
    // the tree catches up when the run ends
  }
}

// -- start a run ------------------------------------------------------------------------

// The agents and the teams of agents a run can be started on (teams too: the routes of a
// team's runs are known once its id is).
async function loadAgents() {
  const select = $("new-run-agent");
  const status = $("server-status");
  let agents;
  let teams;
  try {
    [agents, teams] = await Promise.all([api.agents(), api.teams()]);
    status.className = "server-status ok";
    status.textContent = `Connected to ${location.host}`;
  } catch (error) {
    status.className = "server-status down";
    status.textContent = error.message;
    return;
  }
  const options = (list) => list.map((a) => h("option", { value: a.id }, a.name ? `${a.name} (${a.id})` : a.id));
  fill(
    select,
    h("optgroup", { label: "Agents" }, options(agents)),
    teams.length ? h("optgroup", { label: "Teams" }, options(teams)) : null,
  );
}

function setUpNewRun() {
  const form = $("new-run");
  const errors = h("div", { class: "form-errors" });
  form.append(errors);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const body = { message: data.get("message") };
    if (data.get("session_id").trim()) body.session_id = data.get("session_id").trim();
    await stream({
      title: `New run of ${data.get("agent")}`,
      events: api.createRun(data.get("agent"), body),
      submit: form.querySelector("button[type=submit]"),
      errors,
    });
  });
}

// -- the approvals inbox ----------------------------------------------------------------

function refreshInbox() {
  return loadInbox($("inbox"), {
    open: (a) => href.run(a.session_id, a.run_id),
    // its run resumed on the server, in the background: show it once it stops again
    resolved: async (a) => {
      await refreshInbox();
      await stopped(a.agent_id, a.run_id, a.session_id);
      await Promise.all([loadSessions(), refreshInbox()]);
      go(href.run(a.session_id, a.run_id), "run-title", true);
    },
  });
}

// Waits (a while at most) for a run resumed in the background to stop: completed, failed,
// or paused again.
async function stopped(agentId, runId, sessionId) {
  for (let tries = 0; tries < 120; tries++) {
    try {
      const run = await api.run(agentId, runId, sessionId);
      if (run.status !== "PENDING" && run.status !== "RUNNING") return;
    } catch {
      return; // the run panel says what is wrong
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

// -- start ------------------------------------------------------------------------------

setUpNewRun();
setUpSignOut();
$("sessions-refresh").addEventListener("click", loadSessions);
$("inbox-refresh").addEventListener("click", refreshInbox);
window.addEventListener("hashchange", () => route());
await Promise.all([loadAgents(), loadSessions(), refreshInbox()]);
await route();
