// Two runs of a session's tree side by side from their common checkpoint: what the diff
// (GET .../runs/{id}/diff) says each holds past it, with added, removed and edited marked.

import { api } from "./api.js";
import { errorBox, fill, h, loading, shortId, statusBadge } from "./dom.js";
import { $, go, href } from "./routes.js";
import { messageItem } from "./transcript.js";

// Fills the run panel with the diff of two nodes of a session's tree (routes.js `node`): two
// runs, or two member runs, each through its team run; `teamOf(runId)` is the agent (or
// team) of one of the session's runs.
export async function compareView(sessionId, [a, b], { teamOf }) {
  const name = (n) => shortId(n.memberRunId ?? n.runId);
  $("run-title").textContent = `Compare ${a.memberRunId ? "member runs " : ""}${name(a)} with ${name(b)}`;
  const body = fill($("run-body"), loading("Comparing…"));
  const teamRuns = new Map([a, b].map((n) => [n.memberRunId, n.runId]));
  // a member run opens in its team run's tree
  const link = (runId) =>
    teamRuns.has(runId) ? href.run(sessionId, teamRuns.get(runId), null, runId) : href.run(sessionId, runId);
  try {
    const diff =
      a.memberRunId === null
        ? await api.diff(teamOf(a.runId), a.runId, sessionId, b.runId)
        : await api.memberDiff(teamOf(a.runId), a.runId, a.memberRunId, sessionId, b.runId, b.memberRunId);
    fill(body, diffView(diff, { href: link }));
  } catch (error) {
    fill(body, errorBox(error, { retry: () => go(location.hash, null, true) }));
  }
}

// Two pickers of the session's runs and a button; `compare(a, b)` once both are chosen.
export function compareForm(runs, { base, other, compare }) {
  const option = (run, chosen) =>
    h("option", { value: run.run_id, selected: run.run_id === chosen }, `${shortId(run.run_id)} · ${run.status} · ${run.run_input ?? ""}`);
  const picker = (id, label, chosen) => [
    h("label", { for: id }, label),
    h("select", { id, name: id, required: true }, runs.map((run) => option(run, chosen))),
  ];
  const form = h(
    "form",
    { class: "stack compare-form", "aria-labelledby": "compare-form-title" },
    h("h3", { id: "compare-form-title", class: "section-title" }, "Compare two runs"),
    picker("compare-base", "Run", base),
    picker("compare-other", "with run", other),
    h("button", { type: "submit" }, "Compare"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    compare(form.elements["compare-base"].value, form.elements["compare-other"].value);
  });
  return form;
}

// The diff of two runs: a column per run, each listing its messages past the common
// checkpoint, then the tool calls whose outcome differs.
export function diffView(diff, { href }) {
  const { base, other, messages } = diff;
  const column = (side, changes) =>
    h(
      "section",
      { class: "compare-side", "aria-label": `Run ${shortId(side.run_id)}` },
      h(
        "p",
        { class: "compare-head" },
        h("a", { href: href(side.run_id) }, `Run ${shortId(side.run_id)}`),
        " ",
        statusBadge(side.status),
        h("span", { class: "meta" }, ` · to message ${side.message_index} · ${side.metrics.input_tokens} in · ${side.metrics.output_tokens} out since the split`),
      ),
      changes.length
        ? h(
            "ol",
            { class: "transcript", "aria-label": `Only in run ${shortId(side.run_id)}` },
            changes.map(({ change, entry }) => {
              const item = messageItem(entry.message, entry.message_index, {});
              item.classList.add(`diff-${change}`);
              // an edit says "edited" already; what it replaced, and the rest, say so here
              const tag = change !== "edited" ? "only here" : entry.message.replaces ? null : "replaced";
              if (tag) item.querySelector(".msg-head").append(h("span", { class: "tag" }, tag));
              return item;
            }),
          )
        : h("p", { class: "meta" }, "Nothing past the common checkpoint."),
    );
  const byIndex = (a, b) => a.entry.message_index - b.entry.message_index;
  const baseChanges = [
    ...messages.removed.map((entry) => ({ change: "removed", entry })),
    ...messages.edited.map((pair) => ({ change: "edited", entry: pair.base })),
  ].sort(byIndex);
  const otherChanges = [
    ...messages.added.map((entry) => ({ change: "added", entry })),
    ...messages.edited.map((pair) => ({ change: "edited", entry: pair.other })),
  ].sort(byIndex);
  return h(
    "div",
    { class: "compare" },
    h("p", { class: "note compare-common" }, `Both runs hold the same first ${diff.common_message_index} messages; below is what each holds after them.`),
    h("div", { class: "compare-columns" }, column(base, baseChanges), column(other, otherChanges)),
    toolChanges(diff.tools),
  );
}

function toolChanges(tools) {
  const call = (t) => `${t.tool_name}(${JSON.stringify(t.tool_args)})`;
  const rows = [
    ...tools.changed.map((pair) => [call(pair.base), `${pair.base.result ?? "—"} → ${pair.other.result ?? "—"}`]),
    ...tools.removed.map((t) => [call(t), `only in the first run: ${t.result ?? "—"}`]),
    ...tools.added.map((t) => [call(t), `only in the second run: ${t.result ?? "—"}`]),
  ];
  if (!rows.length) return null;
  return h(
    "section",
    { "aria-labelledby": "compare-tools-title" },
    h("h3", { id: "compare-tools-title", class: "section-title" }, "Tool calls that differ"),
    h("ul", { class: "compare-tools" }, rows.map(([what, how]) => h("li", {}, h("code", {}, what), " ", how))),
  );
}
