// A team run as a tree: under each delegation call of the leader's transcript, the member
// run it started, with its own transcript and checkpoints (the team timeline's `members`).

import { api } from "./api.js";
import { empty, h, shortId, statusBadge } from "./dom.js";
import { editActions } from "./edits.js";
import { node } from "./routes.js";
import { transcript } from "./transcript.js";

// The member runs a team run's timeline lists (under the checkpoint after their delegation,
// or, when none follows it yet, the timeline's own), each with `run`, its transcript as far
// as it is known: the team run nests its own member runs (member_responses); one it
// inherited, from the run it was continued from, is read at its last checkpoint.
export async function loadMembers(run, timeline) {
  const nested = new Map(run.member_responses.map((r) => [r.run_id, r]));
  const listed = [...timeline.checkpoints.flatMap((cp) => cp.members), ...timeline.members];
  const known = async (member) => {
    if (nested.has(member.run_id)) return nested.get(member.run_id);
    const last = member.checkpoints.at(-1);
    if (!last) return null;
    const at = await api.memberSnapshot(run.team_id, run.run_id, member.run_id, last.message_index, run.session_id);
    return at.snapshot;
  };
  return Promise.all(listed.map(async (member) => ({ ...member, run: await known(member) })));
}

// The team transcript's nested part: for the team run's message `index`, the member runs of
// the delegation calls it makes. `selected` is {memberRunId, at} when a member's boundary
// is, `select(member, at)` selects one, `fork(body, ...)` continues the team run (the
// Edit buttons at a selected boundary fork the member's run with an edit), and
// `compare(a, b)` opens the diff of two member runs (routes.js `node`s).
export function memberRuns(run, members, { selected, select, fork, compare }) {
  const byCall = new Map(members.map((m) => [m.tool_call_id, m]));
  const context = { teamRunId: run.run_id, selected, select, fork };
  const others = (member) => comparable(run, members, member);
  return (index) =>
    (run.messages[index].tool_calls || [])
      .filter((call) => byCall.has(call.id))
      .map((call) => {
        const member = byCall.get(call.id);
        const section = memberRun(member, context);
        const form = compareWith(node(run.run_id, member.run_id), others(member), compare);
        if (form) section.querySelector(".member-head").after(form);
        return section;
      });
}

// The runs of the same member that `member`'s run can be compared with: the team run's
// other runs of that member (its own and those it inherited), and the run it was forked
// from, in the team run this one was continued from.
function comparable(run, members, member) {
  const found = members
    .filter((m) => m.agent_id === member.agent_id && m.run_id !== member.run_id)
    .map((m) => ({ node: node(run.run_id, m.run_id), label: `${shortId(m.run_id)} · ${m.status}` }));
  if (member.forked_from_run_id && run.forked_from_run_id && !run.forked_from_session_id) {
    const source = node(run.forked_from_run_id, member.forked_from_run_id);
    found.push({ node: source, label: `${shortId(member.forked_from_run_id)} · the run it was forked from` });
  }
  return found;
}

function compareWith(self, others, compare) {
  if (!others.length) return null;
  const id = `compare-member-${self.memberRunId}`;
  const picker = h("select", { id }, others.map((o, i) => h("option", { value: String(i) }, o.label)));
  const form = h(
    "form",
    { class: "member-compare" },
    h("label", { for: id }, "Compare this run with "),
    picker,
    h("button", { type: "submit", class: "small" }, "Compare"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    compare(self, others[Number(picker.value)].node);
  });
  return form;
}

function memberRun(member, { teamRunId, selected, select, fork }) {
  const at = selected?.memberRunId === member.run_id ? selected.at : null;
  const edits =
    at === null || !member.run
      ? null
      : editActions(member.run, at, { fork: (body, how) => fork({ ...body, member_run_id: member.run_id }, how) });
  return h(
    "section",
    { class: "member-run", "aria-label": `Member ${member.agent_id}, run ${shortId(member.run_id)}`, dataset: { memberRunId: member.run_id } },
    h(
      "p",
      { class: "member-head" },
      h("span", { class: "lineage-icon", "aria-hidden": "true" }, "↳ "),
      h("strong", {}, member.agent_id),
      h("code", { class: "run-id" }, shortId(member.run_id)),
      statusBadge(member.status),
      // made by the team run this one was continued from, and kept as it was
      member.parent_run_id === teamRunId ? null : h("span", { class: "tag" }, `inherited from run ${shortId(member.parent_run_id)}`),
      member.forked_from_run_id
        ? h("span", { class: "lineage" }, `forked from ${shortId(member.forked_from_run_id)} at message ${member.forked_from_message_index}`)
        : null,
    ),
    member.run?.messages?.length
      ? transcript(member.run, member.checkpoints, { selected: at, select: (k) => select(member, k), actions: edits, owner: member.agent_id })
      : empty("No messages of this member's run yet."),
  );
}
