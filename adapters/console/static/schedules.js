// The schedules page: each schedule of the team with its next run, enable/disable, a
// trigger, and its last runs (each a link to the run in the console). Every datum comes
// from the public HTTP API (api.js).

import { api } from "./api.js";
import { setUpSignOut } from "./credentials.js";
import { empty, errorBox, fill, h, loading, onSubmit, shortId, statusBadge, when } from "./dom.js";

const $ = (id) => document.getElementById(id);

const runLink = (run) =>
  h(
    "a",
    { href: `./#/sessions/${encodeURIComponent(run.session_id)}/runs/${encodeURIComponent(run.run_id)}` },
    statusBadge(run.status),
    ` ${shortId(run.run_id)} `,
    when(run.triggered_at),
  );

async function lastRuns(schedule, into) {
  try {
    const page = await api.scheduleRuns(schedule.id);
    fill(into, page.data.length ? h("ul", { class: "plain" }, page.data.map((r) => h("li", {}, runLink(r)))) : h("p", { class: "meta" }, "No runs yet"));
  } catch (error) {
    fill(into, errorBox(error));
  }
}

function row(schedule) {
  const runs = h("div", { class: "schedule-runs" }, loading());
  const errors = h("div", { class: "form-errors" });
  const act = async (doing) => {
    fill(errors);
    try {
      await doing();
      await show();
    } catch (error) {
      fill(errors, errorBox(error));
    }
  };
  const item = h(
    "li",
    { class: "card schedule", dataset: { scheduleId: schedule.id } },
    h("h3", {}, schedule.name, " ", h("span", { class: "badge" }, schedule.enabled ? "enabled" : "disabled")),
    h(
      "p",
      { class: "meta" },
      `${schedule.agent_id} · `,
      h("code", {}, schedule.cron_expr || "on demand"),
      ` ${schedule.timezone} · next run: `,
      schedule.next_run_at ? when(schedule.next_run_at) : "none",
    ),
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", onclick: () => act(() => api.setScheduleEnabled(schedule.id, !schedule.enabled)) }, schedule.enabled ? `Disable ${schedule.name}` : `Enable ${schedule.name}`),
      h("button", { type: "button", onclick: () => act(() => api.triggerSchedule(schedule.id, crypto.randomUUID())) }, `Trigger ${schedule.name}`),
    ),
    errors,
    h("h4", {}, "Last runs"),
    runs,
  );
  lastRuns(schedule, runs);
  return item;
}

async function show() {
  const list = $("schedules");
  if (!list.firstChild) fill(list, loading());
  try {
    const page = await api.schedules();
    fill(list, page.data.length ? h("ul", { class: "plain" }, page.data.map(row)) : empty("No schedules yet."));
  } catch (error) {
    fill(list, errorBox(error, { retry: show }));
  }
}

async function setUpForm() {
  const select = $("new-schedule-agent");
  try {
    fill(select, (await api.agents()).map((a) => h("option", { value: a.id }, a.name || a.id)));
  } catch (error) {
    fill($("new-schedule-errors"), errorBox(error));
  }
  const form = $("new-schedule");
  onSubmit(
    form,
    $("new-schedule-errors"),
    () => ({
      name: form.name.value.trim(),
      cron_expr: form.cron_expr.value.trim(),
      timezone: form.timezone.value.trim() || "UTC",
      endpoint: `/agents/${form.agent.value}/runs`,
      payload: { message: form.message.value },
    }),
    async (body) => {
      try {
        await api.createSchedule(body);
        form.reset();
        await show();
      } catch (error) {
        fill($("new-schedule-errors"), errorBox(error, { title: "Not created" }));
      }
    },
  );
}

setUpSignOut();
$("schedules-refresh").addEventListener("click", show);
setUpForm();
show();
