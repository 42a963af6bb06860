// The console's state and its routes (#/sessions/{id}/runs/{id}/at/{k}), shared by its
// panels: each panel reads `state`, and moves with `go`, which the router (app.js) follows.

export const $ = (id) => document.getElementById(id);

export const state = {
  sessions: null, // the sessions list once loaded
  sessionId: null,
  session: null, // {session, runs} once loaded
  run: null, // {run, checkpoints, members} once loaded (members: a team run's, else [])
  at: null, // the selected boundary
  member: null, // the member run (of a team run) whose boundary `at` is, if one is
  live: null, // the LiveRun being streamed
};

// A node of a session's run tree to compare: a run, or a member run of a team run.
export const node = (runId, memberRunId = null) => ({ runId, memberRunId });
const nodePart = (n) => encodeURIComponent(n.memberRunId === null ? n.runId : `${n.runId}/${n.memberRunId}`);
const nodeOf = (part) => node(...part.split("/"));

export const href = {
  session: (sessionId) => `#/sessions/${encodeURIComponent(sessionId)}`,
  // a boundary of the run, or of one of its member runs (a team run's; without a
  // boundary, the member's last checkpoint)
  run: (sessionId, runId, at = null, member = null) =>
    `${href.session(sessionId)}/runs/${encodeURIComponent(runId)}` +
    `${member === null ? "" : `/members/${encodeURIComponent(member)}`}${at === null ? "" : `/at/${at}`}`,
  // two nodes (see `node`)
  compare: (sessionId, a, b) => `${href.session(sessionId)}/compare/${nodePart(a)}/${nodePart(b)}`,
};

export function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const route = { sessionId: null, runId: null, at: null, member: null, compare: null };
  if (parts[0] === "sessions" && parts[1]) route.sessionId = parts[1];
  if (parts[2] === "runs" && parts[3]) route.runId = parts[3];
  if (parts[2] === "compare" && parts[3] && parts[4]) route.compare = [nodeOf(parts[3]), nodeOf(parts[4])];
  let rest = parts.slice(4);
  if (rest[0] === "members" && rest[1]) [route.member, rest] = [rest[1], rest.slice(2)];
  if (rest[0] === "at" && /^\d+$/.test(rest[1] || "")) route.at = Number(rest[1]);
  return route;
}

let router = () => {};
let after = {}; // what the next route does besides routing: {focus, reload}

export const follow = (route) => {
  router = route;
};

// What the next route does besides routing, once: {focus, reload}.
export function taken() {
  const was = after;
  after = {};
  return was;
}

// Navigates to `url`, then focuses the element `focus`; `reload` refetches what is shown.
export function go(url, focus, reload = false) {
  after = { focus, reload };
  if (location.hash === url) router();
  else location.hash = url;
}
