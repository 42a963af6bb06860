// The approvals inbox: the calls paused runs wait on, for this team (GET /approvals),
// each approved or rejected here (POST /approvals/{id}/resolve), which resumes its run on
// the server exactly as a continue with the same decision would.

import { api } from "./api.js";
import { empty, errorBox, fill, h, loading, shortId } from "./dom.js";

// Fills `box` with the pending approvals; `open(approval)` is the href of its run, and
// `resolved(approval)` runs once one was decided here.
export async function loadInbox(box, { open, resolved }) {
  if (!box.childElementCount) fill(box, loading("Loading approvals…"));
  let page;
  try {
    page = await api.approvals();
  } catch (error) {
    fill(box, errorBox(error, { retry: () => loadInbox(box, { open, resolved }) }));
    return;
  }
  const waiting = page.data.filter((a) => a.run_status === "PAUSED");
  fill(
    box,
    waiting.length
      ? h("ul", { class: "inbox", "aria-label": "Approvals waiting" }, waiting.map((a) => item(a, { open, resolved })))
      : empty("Nothing waits for a decision."),
  );
}

function item(approval, { open, resolved }) {
  const reason = h("input", { id: `reject-reason-${approval.id}`, autocomplete: "off" });
  const errors = h("div", { class: "form-errors" });
  const calls = approval.requirements.map((c) =>
    h("code", {}, `${c.tool_name}(${JSON.stringify(c.tool_args)})`, c.in_doubt ? " (may have run)" : ""),
  );
  const decide = async (status, button) => {
    button.disabled = true;
    fill(errors);
    const note = reason.value.trim();
    const body = { status, ...(status === "rejected" && note ? { resolution_data: { note } } : {}) };
    try {
      await api.resolveApproval(approval.id, body);
    } catch (error) {
      button.disabled = false;
      fill(errors, errorBox(error));
      return;
    }
    await resolved(approval);
  };
  const approve = h("button", { type: "button", class: "primary small" }, "Approve");
  const reject = h("button", { type: "button", class: "small" }, "Reject");
  approve.addEventListener("click", () => decide("approved", approve));
  reject.addEventListener("click", () => decide("rejected", reject));
  return h(
    "li",
    { class: "inbox-item stack", "aria-label": `Approval: ${approval.tool_name}, run ${shortId(approval.run_id)}` },
    h("p", {}, calls),
    h("p", { class: "meta" }, h("a", { href: open(approval) }, `Run ${shortId(approval.run_id)}`), ` · ${approval.source_name ?? approval.agent_id}`),
    h("label", { for: reason.id }, "Note if rejected ", h("span", { class: "hint" }, "(optional; the model reads it)")),
    reason,
    h("div", { class: "actions" }, approve, reject),
    errors,
  );
}
