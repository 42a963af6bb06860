// Small DOM helpers: elements from data, never from HTML strings (run content is untrusted).

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

export function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

export const shortId = (id) => (id ? id.slice(0, 8) : "");

export function when(epochSeconds) {
  const date = new Date(epochSeconds * 1000);
  return h("time", { datetime: date.toISOString() }, date.toLocaleString());
}

export function statusBadge(status) {
  return h("span", { class: `badge status-${status.toLowerCase()}` }, status);
}

export function loading(text = "Loading…") {
  return h("p", { class: "state loading", role: "status" }, h("span", { class: "spinner", "aria-hidden": "true" }), text);
}

export function empty(text, ...more) {
  return h("div", { class: "state empty" }, h("p", {}, text), ...more);
}

const TITLES = {
  0: "The server cannot be reached",
  403: "Not allowed",
  404: "Not found",
  409: "Conflict",
  500: "Server error",
};

// An error box: what failed, the server's words, and a way to try again.
export function errorBox(error, { title, retry } = {}) {
  const heading = title || TITLES[error.status] || (error.status >= 500 ? "Server error" : "Request refused");
  return h(
    "div",
    { class: "state error", role: "alert" },
    h("p", { class: "error-title" }, heading),
    h("p", {}, error.message),
    error.code || error.requestId
      ? h(
          "p",
          { class: "meta" },
          error.code ? h("code", {}, error.code) : null,
          error.requestId ? ` · request ${error.requestId}` : null,
        )
      : null,
    retry ? h("button", { type: "button", onclick: retry }, "Try again") : null,
  );
}

// A form whose submit builds a request body, then `send`s it: a `build` that throws (the
// page refuses what it can check, such as JSON) shows why by the form and sends nothing.
export function onSubmit(form, errors, build, send) {
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    fill(errors);
    let body;
    try {
      body = build();
    } catch (error) {
      fill(errors, errorBox(error, { title: "Not sent" }));
      return;
    }
    await send(body);
  });
}

// A term and its value in a list of facts (<dl>).
export function fact(term, value, className = null) {
  return h("div", { class: className }, h("dt", {}, term), h("dd", {}, value));
}
