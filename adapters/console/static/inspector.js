// The inspector: a run (or member run) as it was at a boundary, and the form that
// continues from there.

import { api } from "./api.js";
import { empty, fact, fill, h, shortId, statusBadge, when } from "./dom.js";
import { $, state } from "./routes.js";

export function showNoSnapshot() {
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


export const snapshotTitle = (at, owner) => `Snapshot${owner ? ` of ${owner.agent_id}'s run` : ""} at message ${at}`;

// A snapshot of the run, or of its member run `owner` (a team run's); `stream` starts a
// continue's stream (see app.js).
export function renderSnapshot(snap, owner, stream) {
  const { run } = state.run;
  const s = snap.snapshot;
  const cp = snap.checkpoint;
  $("inspector-title").textContent = snapshotTitle(snap.message_index, owner);
  const form = continueForm(run, snap.message_index, owner, stream);
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
function continueForm(run, at, owner, stream) {
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
