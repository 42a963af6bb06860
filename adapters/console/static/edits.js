// Edit and fork from the transcript. At a selected boundary, the messages before it that an
// edit may replace get an Edit button: the last user message, each tool call's result, and
// the arguments of each call of the tool batch that ends there (the call then runs again).
// Its form makes the fork (POST .../continue with `edits`); the source stays as it is.

import { h, onSubmit } from "./dom.js";

// What an edit may replace before boundary `at`: [index, edit] pairs, an edit being
// {kind, label, initial, toolCallId?}.
export function editableAt(messages, at) {
  const before = messages.slice(0, at);
  const found = [];
  const lastUser = before.map((m) => m.role).lastIndexOf("user");
  if (lastUser >= 0) {
    found.push([lastUser, { kind: "user_message", label: "New message", initial: before[lastUser].content ?? "" }]);
  }
  before.forEach((m, i) => {
    if (m.role === "tool" && m.tool_call_id) {
      const label = `New result of ${m.tool_name || "the call"}`;
      found.push([i, { kind: "tool_result", label, initial: m.content ?? "", toolCallId: m.tool_call_id }]);
    }
  });
  // the batch that ends at the boundary: an assistant turn with calls, then only results
  let turn = at - 1;
  while (turn >= 0 && before[turn].role === "tool") turn -= 1;
  if (turn >= 0 && turn < at - 1) {
    for (const call of before[turn].tool_calls || []) {
      const label = `New arguments of ${call.function.name} (JSON)`;
      const initial = pretty(call.function.arguments);
      found.push([turn, { kind: "tool_arguments", label, initial, toolCallId: call.id, name: call.function.name }]);
    }
  }
  return found;
}

function pretty(argumentText) {
  try {
    return JSON.stringify(JSON.parse(argumentText), null, 2);
  } catch {
    return argumentText;
  }
}

const BUTTON_TEXT = { user_message: "Edit message", tool_result: "Edit result", tool_arguments: "Edit arguments" };

// The transcript's actions at boundary `at`: for message `index`, its Edit buttons, each
// opening the form that forks the run with that edit (`fork(body, {title, submit, errors})`).
export function editActions(run, at, { fork }) {
  const byIndex = new Map();
  for (const [index, edit] of editableAt(run.messages || [], at)) {
    byIndex.set(index, [...(byIndex.get(index) || []), edit]);
  }
  return (index) =>
    (byIndex.get(index) || []).map((edit) => {
      const where = edit.kind === "tool_arguments" ? `of ${edit.name} ` : "";
      const button = h(
        "button",
        { type: "button", class: "ghost small edit-button", "aria-label": `${BUTTON_TEXT[edit.kind]} ${where}(message ${index})`, "aria-expanded": "false" },
        BUTTON_TEXT[edit.kind],
      );
      button.addEventListener("click", () => {
        const open = button.nextElementSibling?.classList.contains("edit-form");
        if (open) return button.nextElementSibling.querySelector("textarea").focus();
        const form = editForm(run, at, index, edit, { fork, close: () => close(button, form) });
        button.after(form);
        button.setAttribute("aria-expanded", "true");
        form.querySelector("textarea").focus();
      });
      return button;
    });
}

function close(button, form) {
  form.remove();
  button.setAttribute("aria-expanded", "false");
  button.focus();
}

function editForm(run, at, index, edit, { fork, close }) {
  const id = `edit-${index}-${edit.toolCallId || "user"}`;
  const text = h("textarea", { id, name: "edit", rows: edit.kind === "tool_arguments" ? "4" : "2", required: true }, edit.initial);
  const errors = h("div", { class: "form-errors" });
  const submit = h("button", { type: "submit", class: "primary" }, "Fork with this edit");
  const form = h(
    "form",
    { class: "stack edit-form", "aria-label": `Edit message ${index} and fork at message ${at}` },
    h("label", { for: id }, edit.label),
    text,
    h(
      "p",
      { class: "meta" },
      edit.kind === "tool_arguments"
        ? `Makes a new run forked at message ${at} in which this call runs again with these arguments; this run stays as it is.`
        : `Makes a new run forked at message ${at} with this edit; this run stays as it is.`,
    ),
    h("div", { class: "form-actions" }, submit, h("button", { type: "button", onclick: close }, "Cancel")),
    errors,
  );
  onSubmit(
    form,
    errors,
    () => ({ session_id: run.session_id, continue_from: at, edits: [edited(edit, text.value)] }),
    (body) => fork(body, { title: `Forking run ${run.run_id.slice(0, 8)} at message ${at} with an edit`, submit, errors }),
  );
  return form;
}

// The edit as the API takes it (RunEdit); arguments that are not a JSON object are refused here.
function edited(edit, value) {
  if (edit.kind === "user_message") return { kind: edit.kind, content: value };
  if (edit.kind === "tool_result") return { kind: edit.kind, tool_call_id: edit.toolCallId, content: value };
  return { kind: edit.kind, tool_call_id: edit.toolCallId, arguments: jsonObject(value, `The arguments of ${edit.name}`) };
}

// `text` as a JSON object, or an Error saying what is wrong with it.
export function jsonObject(text, what) {
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${what} are not JSON: write an object such as {"city": "Paris"}.`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new Error(`${what} must be a JSON object, such as {"city": "Paris"}.`);
  }
  return value;
}
