// A paused batch decided from the console. For each call that waits on a person: run it as
// the model proposed, run it with edited arguments (checked against the tool's schema by
// the server), reject it with a reason the model reads, or answer it (a result given instead
// of running it). POST .../continue with `tools` resumes the run in place.

import { h, onSubmit } from "./dom.js";
import { jsonObject } from "./edits.js";

const CHOICES = [
  ["run", "Run it"],
  ["edit", "Run it with these arguments"],
  ["reject", "Reject it"],
  ["answer", "Answer it myself"],
];

// The form for the calls `waiting` (a run's tools); `send(body, {title, submit, errors})`.
export function decisionForm(run, waiting, { send }) {
  const calls = waiting.map((call, n) => callDecision(call, n));
  const errors = h("div", { class: "form-errors" });
  const submit = h("button", { type: "submit", class: "primary" }, "Send the decisions");
  const form = h(
    "form",
    { class: "stack decision-form", "aria-labelledby": "decide-title" },
    h("h3", { id: "decide-title", class: "section-title" }, "Decide the paused calls"),
    calls.map((c) => c.el),
    submit,
    errors,
  );
  onSubmit(
    form,
    errors,
    () => ({ session_id: run.session_id, tools: calls.map((c) => c.decision()) }),
    (body) => send(body, { title: `Resuming run ${run.run_id.slice(0, 8)} with your decisions`, submit, errors }),
  );
  return form;
}

// One call's fieldset: a choice, and the field that choice needs (shown once chosen).
function callDecision(call, n) {
  const id = (what) => `decision-${n}-${what}`;
  const args = h("textarea", { id: id("args"), rows: "3" }, JSON.stringify(call.tool_args ?? {}, null, 2));
  const reason = h("input", { id: id("reason"), autocomplete: "off" });
  const result = h("textarea", { id: id("result"), rows: "2" });
  const fields = {
    edit: h("div", { class: "stack", hidden: true }, h("label", { for: id("args") }, "Arguments (JSON)"), args),
    reject: h("div", { class: "stack", hidden: true }, h("label", { for: id("reason") }, "Reason ", h("span", { class: "hint" }, "(optional; the model reads it)")), reason),
    answer: h("div", { class: "stack", hidden: true }, h("label", { for: id("result") }, "Result"), result),
  };
  let chosen = "run";
  const radios = CHOICES.map(([value, text]) => {
    const radio = h("input", { type: "radio", name: id("choice"), id: id(value), value, checked: value === chosen });
    radio.addEventListener("change", () => {
      chosen = value;
      for (const [key, field] of Object.entries(fields)) field.hidden = key !== value;
    });
    return h("div", { class: "choice" }, radio, h("label", { for: id(value) }, text));
  });
  const el = h(
    "fieldset",
    { class: "decision" },
    h("legend", {}, h("code", {}, `${call.tool_name}(${JSON.stringify(call.tool_args ?? {})})`), call.in_doubt ? " (may have run before its process died)" : ""),
    radios,
    Object.values(fields),
  );
  const decision = () => {
    const base = { tool_call_id: call.tool_call_id };
    if (chosen === "run") return { ...base, confirmed: true };
    if (chosen === "edit") return { ...base, confirmed: true, tool_args: jsonObject(args.value, `The arguments of ${call.tool_name}`) };
    if (chosen === "reject") {
      const note = reason.value.trim();
      return { ...base, confirmed: false, ...(note ? { confirmation_note: note } : {}) };
    }
    return { ...base, result: result.value };
  };
  return { el, decision };
}
