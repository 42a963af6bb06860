// Lineage trees: a session's runs by fork and regeneration, and sessions by session fork.

import { h, shortId, statusBadge, when } from "./dom.js";

// The run a run came from, if it is in the same list: regenerated_from, else forked_from_run_id.
// A run copied by a session fork points at a run of the source session: a root here.
function parentOf(run, byId) {
  const parent = run.regenerated_from || run.forked_from_run_id;
  return parent && byId.has(parent) ? parent : null;
}

// Runs (oldest first) as [{run, children}] roots, children in the same order.
export function runForest(runs) {
  const byId = new Map(runs.map((r) => [r.run_id, { run: r, children: [] }]));
  const roots = [];
  for (const node of byId.values()) {
    const parent = parentOf(node.run, byId);
    (parent ? byId.get(parent).children : roots).push(node);
  }
  return roots;
}

export function lineageText(run) {
  if (run.regenerated_from) return `regenerated from ${shortId(run.regenerated_from)}`;
  if (run.forked_from_session_id) {
    return `copied from session ${run.forked_from_session_id} (run ${shortId(run.forked_from_run_id)})`;
  }
  if (run.forked_from_run_id) {
    return `forked from ${shortId(run.forked_from_run_id)} at message ${run.forked_from_message_index}`;
  }
  return null;
}

export function renderRunTree(roots, { href, current }) {
  const list = (nodes, depth) =>
    h(
      "ul",
      { class: depth ? "tree-children" : "tree", role: depth ? null : "list" },
      nodes.map(({ run, children }) => {
        const lineage = lineageText(run);
        const label = `Run ${shortId(run.run_id)}, ${run.status}${lineage ? `, ${lineage}` : ""}`;
        return h(
          "li",
          { class: "tree-item", dataset: { runId: run.run_id } },
          h(
            "a",
            {
              class: "tree-node",
              href: href(run),
              "aria-current": run.run_id === current ? "page" : null,
              "aria-label": label,
            },
            h(
              "span",
              { class: "tree-line" },
              statusBadge(run.status),
              h("code", { class: "run-id" }, shortId(run.run_id)),
              h("span", { class: "tree-input" }, run.run_input || "(no input)"),
            ),
            h(
              "span",
              { class: "tree-meta" },
              lineage ? h("span", { class: "lineage" }, `↳ ${lineage}`) : null,
              h("span", {}, `${run.message_count} messages · `, when(run.created_at)),
            ),
          ),
          children.length ? list(children, depth + 1) : null,
        );
      }),
    );
  return list(roots, 0);
}

// Sessions (newest first) with each fork under its source when both are listed.
export function renderSessions(sessions, { href, current }) {
  const byId = new Map(sessions.map((s) => [s.session_id, { session: s, forks: [] }]));
  const roots = [];
  for (const node of byId.values()) {
    const source = byId.get(node.session.forked_from_session_id);
    (source ? source.forks : roots).push(node);
  }
  const list = (nodes, nested) =>
    h(
      "ul",
      { class: nested ? "session-forks" : "session-list" },
      nodes.map(({ session, forks }) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              class: "session-link",
              href: href(session),
              "aria-current": session.session_id === current ? "page" : null,
            },
            h("span", { class: "session-id" }, session.session_id),
            h(
              "span",
              { class: "session-meta" },
              session.agent_id,
              session.forked_from_session_id ? ` · fork of ${session.forked_from_session_id}` : "",
            ),
          ),
          forks.length ? list(forks, true) : null,
        ),
      ),
    );
  return list(roots, false);
}
