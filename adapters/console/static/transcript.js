// A run's transcript with its checkpoint timeline marked on it, and a live view of a stream.

import { h } from "./dom.js";

const ROLE_LABEL = { user: "User", assistant: "Assistant", tool: "Tool", system: "System" };
// what a person decided about a paused call, as its result records it
const RULING_LABEL = {
  approved: "approved by a person",
  edited: "run with a person's arguments",
  rejected: "rejected by a person",
  answered: "answered by a person",
};

function args(value) {
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value));
    } catch {
      return value;
    }
  }
  return JSON.stringify(value ?? {});
}

function toolCall(name, argText) {
  return h(
    "div",
    { class: "tool-call" },
    h("span", { class: "tool-label" }, "calls"),
    h("code", {}, `${name}(${argText})`),
  );
}

export function messageItem(msg, index, { inherited, after }) {
  const isError = msg.role === "tool" && msg.tool_call_error;
  const body = [];
  if (msg.role === "tool") {
    body.push(
      h(
        "div",
        { class: "tool-result" },
        h("code", {}, `${msg.tool_name || "tool"}(${args(msg.tool_args)})`),
        h("span", { class: "arrow", "aria-hidden": "true" }, " → "),
        h("span", { class: "visually-hidden" }, isError ? " failed: " : " returned "),
        h("span", { class: "result" }, msg.content ?? ""),
      ),
    );
  } else if (msg.content) {
    body.push(h("p", { class: "content" }, msg.content));
  }
  for (const call of msg.tool_calls || []) body.push(toolCall(call.function.name, args(call.function.arguments)));
  return h(
    "li",
    {
      class: `msg role-${msg.role}${isError ? " is-error" : ""}${inherited ? " inherited" : ""}${after ? " after" : ""}`,
      dataset: { index },
    },
    h(
      "div",
      { class: "msg-head" },
      h("span", { class: "msg-role" }, ROLE_LABEL[msg.role] || msg.role),
      h("span", { class: "msg-index" }, `#${index}`),
      isError ? h("span", { class: "badge status-error" }, "error") : null,
      inherited ? h("span", { class: "tag" }, "inherited") : null,
      msg.replaces ? h("span", { class: "tag", title: `replaces message ${msg.replaces}` }, "edited") : null,
      msg.ruling ? h("span", { class: "tag ruling" }, RULING_LABEL[msg.ruling] || msg.ruling) : null,
    ),
    ...body,
  );
}

// A checkpoint's name; `owner` names the run it is in when it is not the one shown (a team
// member's run nested in its team run's transcript).
export function checkpointLabel(cp, owner = null) {
  return `Checkpoint at message ${cp.message_index}${owner ? ` of ${owner}` : ""}`;
}

function checkpointMark(cp, { selected, select, owner }) {
  return h(
    "li",
    { class: `boundary${selected ? " selected" : ""}`, dataset: { boundary: cp.message_index } },
    h(
      "button",
      {
        type: "button",
        class: "boundary-button",
        "aria-pressed": selected ? "true" : "false",
        "aria-label": `${checkpointLabel(cp, owner)} (${cp.reason}, ${cp.status})`,
        onclick: () => select(cp.message_index),
      },
      h("span", { class: "boundary-dot", "aria-hidden": "true" }),
      h("span", {}, `Checkpoint · ${cp.message_index}`),
      h("span", { class: "boundary-meta" }, `${cp.reason} · ${cp.policy} · ${cp.status}`),
    ),
  );
}

function forkMark(run) {
  return h(
    "li",
    { class: "boundary fork-mark" },
    h("span", { class: "boundary-dot", "aria-hidden": "true" }),
    `Forked here from run ${run.forked_from_run_id.slice(0, 8)} (message ${run.forked_from_message_index})`,
  );
}

// The timeline strip: one button per checkpoint, placed by message_index along the run.
export function timelineStrip(run, checkpoints, { selected, select }) {
  const total = Math.max(run.message_count, 1);
  return h(
    "div",
    { class: "timeline", role: "group", "aria-label": "Checkpoint timeline" },
    h("div", { class: "timeline-track", "aria-hidden": "true" }),
    h(
      "ol",
      { class: "timeline-marks" },
      checkpoints.map((cp) =>
        h(
          "li",
          { style: `--at: ${(cp.message_index / total) * 100}%` },
          h(
            "button",
            {
              type: "button",
              class: `timeline-mark reason-${cp.reason}`,
              "aria-pressed": cp.message_index === selected ? "true" : "false",
              "aria-label": checkpointLabel(cp),
              title: `${checkpointLabel(cp)}: ${cp.message_preview ?? ""}`,
              onclick: () => select(cp.message_index),
            },
            String(cp.message_index),
          ),
        ),
      ),
    ),
  );
}

// Messages in order, with a checkpoint mark at each boundary k (after message k-1);
// `actions(index)` gives what a message holds besides itself (its Edit buttons, the runs of
// the members it delegated to), if anything; `owner` names the run if it is nested.
export function transcript(run, checkpoints, { selected, select, actions = null, owner = null }) {
  const marks = new Map(checkpoints.map((cp) => [cp.message_index, cp]));
  const forkAt = run.forked_from_run_id && !run.forked_from_session_id ? run.forked_from_message_index : null;
  const items = [];
  const messages = run.messages || [];
  const boundary = (k) => {
    if (k === forkAt) items.push(forkMark(run));
    if (marks.has(k)) items.push(checkpointMark(marks.get(k), { selected: selected === k, select, owner }));
  };
  messages.forEach((msg, i) => {
    boundary(i);
    const item = messageItem(msg, i, { inherited: forkAt !== null && i < forkAt, after: selected !== null && i >= selected });
    if (actions) item.append(...actions(i));
    items.push(item);
  });
  boundary(messages.length);
  return h("ol", { class: "transcript", "aria-label": owner ? `Transcript of ${owner}` : "Transcript" }, items);
}

// A stream as it comes: assistant text, tool calls and results, checkpoints, the end. A
// team run's stream relays its members' events too (each with the team run's id as its
// `parent_run_id`): each member run's are shown in a live view of their own, nested.
export class LiveRun {
  constructor(title, { nested = false } = {}) {
    this.items = h("ol", { class: "transcript live" });
    // one status region for the whole stream: the team run's
    this.announcer = h("p", nested ? { class: "live-status" } : { class: "live-status", role: "status", "aria-live": "polite" }, "Starting…");
    this.el = h("div", { class: "live-run", "aria-busy": "true" }, h("p", { class: "live-title" }, title), this.announcer, this.items);
    this.text = null;
    this.nested = nested;
    this.members = new Map(); // by member run id
  }

  member({ run_id, agent_id }) {
    if (!this.members.has(run_id)) {
      const member = new LiveRun(`${agent_id}, run ${run_id.slice(0, 8)}`, { nested: true });
      this.members.set(run_id, member);
      this.items.append(h("li", { class: "member-run" }, member.el));
      this.text = null; // the team run's next words start a message of their own
    }
    return this.members.get(run_id);
  }

  say(text) {
    this.announcer.textContent = text;
  }

  add(role, ...body) {
    const item = h("li", { class: `msg role-${role}` }, h("div", { class: "msg-head" }, h("span", { class: "msg-role" }, ROLE_LABEL[role] || role)), ...body);
    this.items.append(item);
    return item;
  }

  // One event of the stream (a team run's named Team*); returns nothing, the view is the state.
  event({ event, data }) {
    if (data.parent_run_id && !this.nested) {
      this.member(data).event({ event, data });
      return;
    }
    switch (event.replace(/^Team/, "")) {
      case "RunStarted":
      case "RunContinued":
        this.say(`Run ${data.run_id.slice(0, 8)} ${event.endsWith("RunStarted") ? "started" : "continued"} on ${data.model}.`);
        break;
      case "RunContent":
        if (!this.text) {
          this.text = h("p", { class: "content" });
          this.add("assistant", this.text);
        }
        this.text.textContent += data.content;
        break;
      case "ModelRequestCompleted":
        this.text = null;
        break;
      case "ToolCallStarted":
        this.say(`Calling ${data.tool.tool_name}.`);
        break;
      case "ToolCallCompleted": {
        const t = data.tool;
        this.add(
          "tool",
          h(
            "div",
            { class: `tool-result${t.tool_call_error ? " is-error" : ""}` },
            h("code", {}, `${t.tool_name}(${args(t.tool_args)})`),
            h("span", { class: "arrow", "aria-hidden": "true" }, " → "),
            h("span", { class: "result" }, t.result ?? ""),
          ),
        );
        break;
      }
      case "CheckpointCreated":
        this.items.append(
          h("li", { class: "boundary" }, h("span", { class: "boundary-dot", "aria-hidden": "true" }), `Checkpoint · ${data.checkpoint.message_index} (${data.checkpoint.reason})`),
        );
        this.say(`Checkpoint at message ${data.checkpoint.message_index}.`);
        break;
      case "RunCompleted":
        this.finish("Run completed.");
        break;
      case "RunPaused":
        this.finish("Run paused: a tool call waits for a decision.");
        break;
      case "RunCancelled":
        this.finish("Run cancelled.");
        break;
      case "RunError":
        this.add("error", h("p", { class: "content" }, data.error || data.content || "The run failed."));
        this.finish("Run failed.");
        break;
      default:
        break;
    }
  }

  finish(text) {
    this.say(text);
    this.el.setAttribute("aria-busy", "false");
  }
}
