// Sign-in: paste a bearer token (an operator's, a principal's or a device session's), or — when the daemon has
// `[a2a.device_grant] enabled` (its /.well-known/oauth-authorization-server answers) — sign in with a device code:
// the page asks POST /oauth2/device_authorization for a code pair, shows the user code for an operator to approve
// (auth.device.approve), and polls POST /oauth2/token as RFC 8628 §3.4-3.5 says: never sooner than the interval
// given, 5 s more after each slow_down, on until the token, a refusal or the code's expiry. The token, pasted or
// issued, is kept in this tab's sessionStorage only and sent in the Authorization header; the device code never
// leaves this page's memory. No <form>: the CSP allows no form action.

import { token } from "../api.js";
import { html, useEffect, useRef, useState } from "../html.js";

const ROOT = new URL("../", document.baseURI);
const CLIENT_ID = "anyagentd-console";
const GRANT_TYPE = "urn:ietf:params:oauth:grant-type:device_code";
const SLOW_DOWN_STEP = 5;

async function oauth(path, form) {
  const response = await fetch(new URL(path, ROOT).href, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form).toString(),
    credentials: "omit",
    cache: "no-store",
  });
  let body = {};
  try {
    body = await response.json();
  } catch {}
  return { ok: response.ok, status: response.status, body };
}

/** Whether the daemon offers the device grant (its authorization server metadata is served). */
async function deviceGrantOffered() {
  try {
    const response = await fetch(new URL(".well-known/oauth-authorization-server", ROOT).href, {
      credentials: "omit",
      cache: "no-store",
    });
    return response.ok;
  } catch {
    return false;
  }
}

const REFUSED = {
  access_denied: "The operator refused this sign-in.",
  expired_token: "The code expired before an operator approved it; start again.",
  invalid_grant: "The code is no longer valid; start again.",
};

function DeviceSignIn({ onSignedIn }) {
  const [flow, setFlow] = useState({ phase: "idle", pair: null, error: null });
  const live = useRef(true);
  const timer = useRef(null);
  useEffect(
    () => () => {
      live.current = false;
      clearTimeout(timer.current);
    },
    [],
  );
  const start = async () => {
    setFlow({ phase: "asking", pair: null, error: null });
    const asked = await oauth("oauth2/device_authorization", { client_id: CLIENT_ID, scope: "user" });
    if (!live.current) return;
    if (!asked.ok) {
      setFlow({ phase: "idle", pair: null, error: asked.body.error_description || `HTTP ${asked.status}` });
      return;
    }
    const pair = asked.body;
    const deadline = Date.now() + pair.expires_in * 1000;
    setFlow({ phase: "waiting", pair, error: null });
    let interval = pair.interval || 5;
    const poll = async () => {
      if (!live.current) return;
      if (Date.now() >= deadline) {
        setFlow({ phase: "idle", pair: null, error: REFUSED.expired_token });
        return;
      }
      let answer;
      try {
        answer = await oauth("oauth2/token", {
          grant_type: GRANT_TYPE,
          device_code: pair.device_code,
          client_id: CLIENT_ID,
        });
      } catch {
        answer = { ok: false, status: 0, body: { error: "authorization_pending" } }; // the network: try again
      }
      if (!live.current) return;
      if (answer.ok && answer.body.access_token) {
        token.set(answer.body.access_token);
        setFlow({ phase: "done", pair: null, error: null });
        onSignedIn();
        return;
      }
      const error = answer.body.error;
      if (error === "slow_down") interval += SLOW_DOWN_STEP;
      if (error === "authorization_pending" || error === "slow_down") {
        timer.current = setTimeout(poll, interval * 1000);
        return;
      }
      setFlow({
        phase: "idle",
        pair: null,
        error: REFUSED[error] || answer.body.error_description || `HTTP ${answer.status}`,
      });
    };
    timer.current = setTimeout(poll, interval * 1000);
  };
  const cancel = () => {
    clearTimeout(timer.current);
    setFlow({ phase: "idle", pair: null, error: null });
  };
  return html`<div class="device-signin">
    <h3>Or sign in with a device code</h3>
    ${flow.error && html`<p class="error" id="device-error">${flow.error}</p>`}
    ${flow.phase === "waiting"
      ? html`<p>Give this code to an operator of this daemon, who approves it (on the console's Admin page, or${" "}
            <code>auth.device.approve</code>):</p>
          <p class="user-code"><code id="user-code">${flow.pair.user_code}</code></p>
          <p class="muted" id="device-waiting">Waiting for the approval…</p>
          <div class="actions"><button id="device-cancel" onClick=${cancel}>Cancel</button></div>`
      : html`<div class="actions">
          <button id="device-start" disabled=${flow.phase !== "idle"} onClick=${start}>Get a sign-in code</button>
        </div>`}
  </div>`;
}

export function SignIn({ reason, onSignedIn }) {
  const [value, setValue] = useState("");
  const [device, setDevice] = useState(false);
  useEffect(() => {
    let live = true;
    deviceGrantOffered().then((offered) => live && setDevice(offered));
    return () => (live = false);
  }, []);
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
      ${device && html`<${DeviceSignIn} onSignedIn=${onSignedIn} />`}
    </div>
  </main>`;
}
