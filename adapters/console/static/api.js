// The public HTTP API of runpoint (openapi/openapi.yaml), and nothing else: the same routes
// any client uses. Every failure is an ApiError carrying the server's {detail, error_code}.

import { signIn, token } from "./credentials.js";

export class ApiError extends Error {
  constructor(status, detail, code, requestId) {
    super(detail);
    this.status = status; // 0 when the server could not be reached
    this.code = code;
    this.requestId = requestId;
  }
}

// The events after which a run's stream ends (openapi RunEventMessage); a team run's are
// named Team* (TeamRunCompleted, ...), as AgentOS names a team's.
const FINAL = ["RunCompleted", "RunPaused", "RunCancelled", "RunError"];
export const FINAL_EVENTS = new Set([...FINAL, ...FINAL.map((e) => `Team${e}`)]);

// Where the API is: the folder above the console's, whatever prefix runpoint is mounted
// under (this module is {prefix}/ui/api.js), so every call below names a path from there.
const BASE = new URL("..", import.meta.url).pathname.replace(/\/$/, "");

const path = (strings, ...values) =>
  strings.reduce((out, s, i) => out + s + (i < values.length ? encodeURIComponent(values[i]) : ""), "");

// Sends the tab's token, if any. A 401 asks for a token (again) and sends the call once more
// with it: the server refuses before it does anything, so nothing happens twice.
async function send(url, init = {}) {
  for (;;) {
    const sent = token();
    const headers = sent ? { ...init.headers, Authorization: `Bearer ${sent}` } : init.headers;
    let response;
    try {
      response = await fetch(BASE + url, { ...init, headers });
    } catch (error) {
      throw new ApiError(0, "The server cannot be reached.", "NETWORK_ERROR", null);
    }
    if (response.ok) return response;
    const error = await errorOf(response);
    if (response.status !== 401) throw error;
    // a call sent before a sign-in that answered meanwhile is sent again with the new token
    if (token() === sent) await signIn(sent ? error.message : null);
  }
}

async function errorOf(response) {
  let body = {};
  try {
    body = await response.json();
  } catch {
    // not the API's error shape: keep the status line
  }
  return new ApiError(
    response.status,
    body.detail || `${response.status} ${response.statusText}`,
    body.error_code || "HTTP_ERROR",
    response.headers.get("x-request-id"),
  );
}

async function json(url, init) {
  const response = await send(url, init);
  return response.status === 204 ? null : response.json();
}

const post = (body, accept = "application/json") => ({
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: accept },
  body: JSON.stringify(body),
});

// The teams of agents the server runs (GET /teams), by id: a team's runs are served under
// /teams/{team_id}, an agent's under /agents/{agent_id}, with the same operations.
const teams = new Set();
export const isTeam = (id) => teams.has(id);
const runner = (id) => (isTeam(id) ? path`/teams/${id}` : path`/agents/${id}`);

export const api = {
  agents: () => json("/agents"),
  teams: async () => {
    const found = await json("/teams");
    for (const team of found) teams.add(team.id);
    return found;
  },
  sessions: (limit = 100) => json(`/sessions?limit=${limit}`),
  session: (sessionId) => json(path`/sessions/${sessionId}`),
  sessionRuns: (sessionId) => json(path`/sessions/${sessionId}/runs`),
  run: (agentId, runId, sessionId) =>
    json(runner(agentId) + path`/runs/${runId}?session_id=${sessionId}`),
  timeline: (agentId, runId, sessionId) =>
    json(runner(agentId) + path`/runs/${runId}/checkpoints?session_id=${sessionId}`),
  snapshot: (agentId, runId, sessionId, index) =>
    json(runner(agentId) + path`/runs/${runId}/checkpoints/${index}?session_id=${sessionId}`),
  memberSnapshot: (teamId, runId, memberRunId, index, sessionId) =>
    json(path`/teams/${teamId}/runs/${runId}/members/${memberRunId}/checkpoints/${index}?session_id=${sessionId}`),
  diff: (agentId, runId, sessionId, otherRunId) =>
    json(runner(agentId) + path`/runs/${runId}/diff?session_id=${sessionId}&other_run_id=${otherRunId}`),
  // two member runs of a team's runs (each through its team run): the team diff's nodes
  memberDiff: (teamId, runId, memberRunId, sessionId, otherRunId, otherMemberRunId) =>
    json(
      path`/teams/${teamId}/runs/${runId}/diff?session_id=${sessionId}&member_run_id=${memberRunId}` +
        path`&other_run_id=${otherRunId}&other_member_run_id=${otherMemberRunId}`,
    ),
  approvals: () => json("/approvals?status=pending&limit=100"),
  resolveApproval: (approvalId, body) => json(path`/approvals/${approvalId}/resolve`, post(body)),
  schedules: () => json("/schedules?limit=1000"),
  createSchedule: (body) => json("/schedules", post(body)),
  setScheduleEnabled: (scheduleId, enabled) =>
    json(enabled ? path`/schedules/${scheduleId}/enable` : path`/schedules/${scheduleId}/disable`, { method: "POST" }),
  triggerSchedule: (scheduleId, key) =>
    json(path`/schedules/${scheduleId}/trigger`, { method: "POST", headers: { "Idempotency-Key": key } }),
  scheduleRuns: (scheduleId, limit = 5) => json(path`/schedules/${scheduleId}/runs?limit=${limit}`),
  forkSession: (agentId, sessionId) =>
    json(runner(agentId) + path`/sessions/${sessionId}/fork`, { method: "POST" }),

  // Streams: POST with stream=true, read as Server-Sent Events (EventSource cannot POST);
  // events=all asks for runpoint's own events (CheckpointCreated) too.
  createRun: (agentId, body, signal) =>
    events(runner(agentId) + "/runs?events=all", body, signal),
  continueRun: (agentId, runId, body, signal) =>
    events(runner(agentId) + path`/runs/${runId}/continue?events=all`, body, signal),
};

// How often a lost stream is joined again, one after another, before it counts as lost.
const RECONNECTS = 5;

// Yields {id, event, data} for each Server-Sent Event of a run. A refused request throws
// before the first event (the server validates before it streams). A stream lost before
// the run stopped is joined again (see `rejoin`) from the id of the last event it gave:
// the server sends what came after it, so no event is missed or given twice.
async function* events(url, body, signal) {
  let response = await send(url, { ...post({ ...body, stream: true }, "text/event-stream"), signal });
  const state = { retry: 1000, last: null, run: null, ended: false };
  let rejoined = false;
  for (let failures = 0; ; ) {
    let gave = false;
    let broke = response === null;
    if (response !== null) {
      try {
        for await (const message of frames(response, state)) {
          gave = true;
          yield message;
        }
      } catch (error) {
        if (signal?.aborted) throw error;
        broke = true;
      }
    }
    // The stream ends after the event that stops the run. A rejoin that ends with nothing
    // new found the run stopped without one (its process died, and it was given up).
    if (state.ended || state.run === null || (rejoined && !gave && !broke)) return;
    failures = gave ? 1 : failures + 1;
    if (failures > RECONNECTS) throw new ApiError(0, "The stream was lost.", "NETWORK_ERROR", null);
    await new Promise((resolve) => setTimeout(resolve, state.retry));
    try {
      response = await send(...rejoin(state, signal));
      rejoined = true;
    } catch (error) {
      if (signal?.aborted || (error.status >= 400 && error.status < 500)) throw error; // refused
      // unreachable, or failing for now: try again
      response = null;
    }
  }
}

// The request that joins a run's stream again after the event `state.last`: an agent run's
// GET .../events with Last-Event-ID; a team run's (its events name a team_id) AgentOS's
// POST .../resume, which counts events from 0 where ids count from 1.
function rejoin(state, signal) {
  const { agent_id, team_id, run_id, session_id } = state.run;
  const headers = { Accept: "text/event-stream" };
  if (team_id) {
    const body = { session_id, last_event_index: Number(state.last) - 1 };
    return [path`/teams/${team_id}/runs/${run_id}/resume?events=all`, { ...post(body, headers.Accept), signal }];
  }
  const url = path`/agents/${agent_id}/runs/${run_id}/events?session_id=${session_id}&events=all`;
  return [url, { headers: { ...headers, "Last-Event-ID": state.last }, signal }];
}

// The events of one response, keeping in `state` the server's retry time, the last id,
// the run's ids and whether the run stopped.
async function* frames(response, state) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replaceAll("\r\n", "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const parsed = parseFrame(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
      if (parsed.retry !== null) state.retry = parsed.retry;
      if (parsed.data === null) continue; // a comment (keep-alive), or retry alone
      state.last = parsed.id;
      state.run ??= parsed.data;
      // the run's own last event, not a member run's (which a team run's stream relays)
      state.ended = FINAL_EVENTS.has(parsed.event) && parsed.data.run_id === state.run.run_id;
      yield { id: parsed.id, event: parsed.event, data: parsed.data };
    }
  }
}

function parseFrame(frame) {
  const fields = { id: null, event: "message", retry: null, data: null };
  const data = [];
  for (const line of frame.split("\n")) {
    if (line.startsWith("id:")) fields.id = line.slice(3).trim();
    else if (line.startsWith("event:")) fields.event = line.slice(6).trim();
    else if (line.startsWith("retry:")) fields.retry = Number(line.slice(6).trim());
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (data.length) fields.data = JSON.parse(data.join("\n"));
  return fields;
}
