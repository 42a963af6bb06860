// The bearer token the console sends, on a server that asks for one (an open server never
// does: no token, no form). It lives in sessionStorage: sent only where api.js puts it, in
// an Authorization header (a cookie would go with every request to the host, and
// localStorage would outlive the tab), and gone when the tab closes.

import { h } from "./dom.js";

const KEY = "runpoint.token";

export const token = () => sessionStorage.getItem(KEY);

let asking = null; // the sign-in in progress, which every refused call waits for

// Shows the sign-in form, with `reason` when a token was refused, until a token is
// submitted; every call refused meanwhile waits for the same one.
export function signIn(reason) {
  sessionStorage.removeItem(KEY);
  asking ||= ask(reason).finally(() => {
    asking = null;
  });
  return asking;
}

// The sign-in form, the same on every page of the console: made below the page's top bar
// the first time a page asks.
function signInForm() {
  const made = document.getElementById("sign-in");
  if (made) return made;
  const section = h(
    "section",
    { class: "card sign-in", id: "sign-in", "aria-labelledby": "sign-in-title", hidden: true },
    h("h2", { id: "sign-in-title" }, "Sign in"),
    h(
      "p",
      { class: "meta" },
      "This server asks for credentials. The console keeps your token for this tab only, " +
        "and forgets it when the tab closes.",
    ),
    h(
      "form",
      { id: "sign-in-form", class: "stack" },
      h("label", { for: "sign-in-token" }, "API key or JWT"),
      h("input", {
        id: "sign-in-token",
        name: "token",
        type: "password",
        required: true,
        autocomplete: "off",
        spellcheck: "false",
        placeholder: "Paste it here",
        "aria-describedby": "sign-in-reason",
      }),
      h("p", { id: "sign-in-reason", class: "form-errors", role: "alert" }),
      h("button", { type: "submit", class: "primary" }, "Sign in"),
    ),
  );
  document.querySelector(".topbar").after(section);
  return section;
}

function ask(reason) {
  signInForm();
  const [section, form, input, why, workspace, signOut] = [
    "sign-in", "sign-in-form", "sign-in-token", "sign-in-reason", "workspace", "sign-out",
  ].map((id) => document.getElementById(id));
  const returnTo = document.activeElement;
  why.textContent = reason ? `The server refused the token: ${reason}` : "";
  input.value = "";
  section.hidden = false;
  workspace.hidden = true;
  signOut.hidden = true;
  input.focus();
  return new Promise((resolve) => {
    form.addEventListener(
      "submit",
      (event) => {
        event.preventDefault();
        sessionStorage.setItem(KEY, input.value.trim());
        section.hidden = true;
        workspace.hidden = false;
        signOut.hidden = false;
        returnTo?.focus();
        resolve();
      },
      { once: true },
    );
  });
}

// The "Sign out" control, there while the tab has a token: it forgets the token, and the page
// starts over so that nothing the token could see stays on it.
export function setUpSignOut() {
  const button = document.getElementById("sign-out");
  button.hidden = !token();
  button.addEventListener("click", () => {
    sessionStorage.removeItem(KEY);
    location.reload();
  });
}
