// Sign-in: paste a bearer token (an operator's, a principal's or a device session's); it is kept in this tab's
// sessionStorage only and sent in the Authorization header. No <form>: the CSP allows no form action.

import { token } from "../api.js";
import { html, useState } from "../html.js";

export function SignIn({ reason, onSignedIn }) {
  const [value, setValue] = useState("");
  const submit = () => {
    if (!value.trim()) return;
    token.set(value.trim());
    setValue("");
    onSignedIn();
  };
  return html`<main>
    <div class="panel signin">
      <h2>Sign in</h2>
      <p>This daemon wants a bearer token: paste one of its operator's or principals' tokens, or a device session's.
        It stays in this browser tab (session storage) and is sent only to this daemon, in the Authorization
        header.</p>
      ${reason && html`<p class="error">${reason}</p>`}
      <div class="actions">
        <input
          type="password"
          id="token"
          autocomplete="off"
          placeholder="bearer token"
          value=${value}
          onInput=${(e) => setValue(e.target.value)}
          onKeyDown=${(e) => e.key === "Enter" && submit()}
        />
        <button class="primary" id="sign-in" onClick=${submit}>Sign in</button>
      </div>
    </div>
  </main>`;
}
