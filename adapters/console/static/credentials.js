// The bearer token the console sends, on a server that asks for one (an open server never
// does: no token, no form). It lives in sessionStorage: sent only where api.js puts it, in
// an Authorization header (a cookie would go with every request to the host, and
// localStorage would outlive the tab), and gone when the tab closes.

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

function ask(reason) {
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
