// The console: the router, the run panel, and the streams it starts. Every datum comes
// from the public HTTP API (api.js).

import { api, ApiError, FINAL_EVENTS, isTeam } from "./api.js";
import { compareView } from "./compare.js";
import { setUpSignOut } from "./credentials.js";
import { decisionForm } from "./decisions.js";
import { empty, errorBox, fact, fill, h, loading, shortId, statusBadge, when } from "./dom.js";
import { editActions } from "./edits.js";
import { loadInbox } from "./inbox.js";
import { renderSnapshot, showNoSnapshot, snapshotTitle } from "./inspector.js";
import { loadMembers, memberRuns } from "./members.js";
import { $, follow, go, href, parseRoute, state, taken } from "./routes.js";
import { highlightRun, loadSessions, renderSession, renderSessionList, showSession } from "./sessions.js";
import { LiveRun, timelineStrip, transcript } from "./transcript.js";

async function route() {
  const { sessionId, runId, at, member, compare } = parseRoute();
  const { focus, reload } = taken();
  state.live = null; // a stream still going on keeps going, but no longer owns the run panel
  if (sessionId !== state.sessionId || reload || !state.session) await showSession(sessionId, runId);
  else highlightRun(runId);
  if (compare !== null) {
    state.run = null;
    showNoSnapshot();
    await compareView(sessionId, compare, { teamOf: (runId) => agentOf(sessionId, runId) });
  } else if (runId === null) {
    state.run = null;
    showNoRun(sessionId);
  } else if (reload || state.run?.run.run_id !== runId) {
    await showRun(sessionId, runId);
  }
  await select(at, at === null ? null : member);
  renderSessionList();
  if (at === null && member !== null) showMember(member);
  else if (focus) $(focus)?.focus();
}

// A member run addressed without a boundary (an approval's, from the inbox): its section of
// the team run's tree, marked, in view and focused.
function showMember(member) {
  for (const section of document.querySelectorAll("#run-body .member-run")) {
    if (section.dataset.memberRunId !== member) continue;
    section.setAttribute("aria-current", "true");
    section.tabIndex = -1;
    section.scrollIntoView({ block: "start" });
    section.focus();
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
    compare: (a, b) => go(href.compare(run.session_id, a, b), "run-title"),
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
  renderSnapshot(snap, owner, stream);
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

// An approval's run: a member run's (a team's member paused) is shown in its team run's
// tree, at the member run's last checkpoint.
const approvalHref = (a) =>
  a.parent_run_id === null ? href.run(a.session_id, a.run_id) : href.run(a.session_id, a.parent_run_id, null, a.run_id);

function refreshInbox() {
  return loadInbox($("inbox"), {
    open: approvalHref,
    // its run (a member's: its team run) resumed on the server, in the background: show it
    // once it stops again
    resolved: async (a) => {
      await refreshInbox();
      if (a.parent_run_id === null) await stopped(a.agent_id, a.run_id, a.session_id);
      else await stopped((await api.session(a.session_id)).agent_id, a.parent_run_id, a.session_id);
      await Promise.all([loadSessions(), refreshInbox()]);
      go(approvalHref(a), "run-title", true);
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

follow(route);
setUpNewRun();
setUpSignOut();
$("sessions-refresh").addEventListener("click", loadSessions);
$("inbox-refresh").addEventListener("click", refreshInbox);
window.addEventListener("hashchange", () => route());
await Promise.all([loadAgents(), loadSessions(), refreshInbox()]);
await route();
