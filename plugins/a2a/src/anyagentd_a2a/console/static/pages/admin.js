// Admin (the operator's page; its nav link shows for the operator alone): every agent's state with pause, resume
// and drain — on an agent's path (/agents/{id}/) for that agent, on the root for the daemon and every agent — the
// introspection switch (admin.set a2a.introspection.enabled), the device sign-ins waiting for an operator
// (auth.device.pending, approve as a name, deny), and the signed-in sessions (auth.sessions) with revocation
// (auth.sessions.revoke).
//
// The daemon is the gate (every op here is the operator's: anyone else's is refused, PERMISSION_DENIED); the page
// follows it: a principal who is not the operator (the role the shell read from the extended card) and opens
// #/admin by hand sees a notice only — no control, no request.

import { command, listAgents } from "../api.js";
import { html, useState } from "../html.js";
import { usePoll } from "../poll.js";

const REFRESH_MS = 3000;
/** The agent id that stands for the root (the daemon: every agent) in this page's rows. */
const ALL = "";

// ------------------------------------------------------------------------------------------------ the link

/** The Admin link of the navigation: rendered for the operator only (`role`: the shell's, from the card). */
export function AdminLink({ role, current }) {
  if (role !== "operator") return null;
  return html`<a href="#/admin" class=${current.page === "admin" ? "current" : ""} id="nav-admin">Admin</a>`;
}

// ------------------------------------------------------------------------------------------------ ops

/** Command op `op` at the root (the daemon as a whole): the result document, as api.command gives an agent's. */
const rootCommand = (op, args = {}) => command(null, op, args);

/** Op `op` on agent `agent`'s path, or at the root when `agent` is ALL. */
const opOn = (agent, op, args = {}) => (agent === ALL ? rootCommand(op, args) : command(agent, op, args));

function settled(result) {
  return result.status === "fulfilled"
    ? { value: result.value, error: null }
    : { value: null, error: result.reason.message };
}

async function load() {
  const [listing, status, config, pending, sessions] = await Promise.allSettled([
    listAgents(),
    rootCommand("status"),
    rootCommand("config"),
    rootCommand("auth.device.pending"),
    rootCommand("auth.sessions"),
  ]);
  return {
    agents: settled(listing),
    status: settled(status),
    config: settled(config),
    pending: settled(pending),
    sessions: settled(sessions),
  };
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "never";
}

// ------------------------------------------------------------------------------------------------ sections

/** One action button: runs `act`, shows its refusal under the row (`onError`), then reloads the page's data. */
function Act({ label, act, busy, setBusy, onError, reload, cls = "", confirm = null, data = {} }) {
  const [asking, setAsking] = useState(false);
  const run = async () => {
    if (confirm && !asking) return setAsking(true);
    setAsking(false);
    setBusy(true);
    onError(null);
    try {
      await act();
    } catch (err) {
      onError(`${label}: ${err.message}`);
    }
    setBusy(false);
    reload();
  };
  return html`<button class=${cls} disabled=${busy} onClick=${run} ...${data}>
    ${asking ? confirm : label}
  </button>`;
}

function AgentRow({ id, label, state, reload }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const common = { busy, setBusy, onError: setError, reload };
  const why = "from the console";
  return html`<tr class="admin-agent" data-agent=${id === ALL ? "*" : id}>
    <td>${label}</td>
    <td><span class=${`badge ${state}`} data-state=${state}>${state}</span></td>
    <td class="actions">
      <${Act} label="Pause" cls="pause" act=${() => opOn(id, "admin.pause", { reason: why })} ...${common} />
      <${Act} label="Resume" cls="resume" act=${() => opOn(id, "admin.resume")} ...${common} />
      <${Act}
        label="Drain"
        cls="deny drain"
        confirm=${id === ALL ? "Drain and stop the daemon?" : "Drain this agent for good?"}
        act=${() => opOn(id, "admin.drain", { reason: why })}
        ...${common}
      />
      ${error && html`<div class="error">${error}</div>`}
    </td>
  </tr>`;
}

function Agents({ agents, status, reload }) {
  const rootState = status.value ? (status.value.draining ? "draining" : status.value.paused ? "paused" : "serving") : "?";
  return html`<div class="panel">
    <h3>Agents</h3>
    ${agents.error && html`<p class="error">${agents.error}</p>`}
    <table class="admin-agents">
      <tr><th>agent</th><th>state</th><th></th></tr>
      <${AgentRow} id=${ALL} label="the daemon (every agent)" state=${rootState} reload=${reload} />
      ${((agents.value && agents.value.agents) || []).map(
        (a) => html`<${AgentRow} key=${a.id} id=${a.id} label=${a.id} state=${a.state} reload=${reload} />`,
      )}
    </table>
    <p class="muted">Pause holds new prompts at a safe boundary; drain refuses new sends, cancels running turns and
      ends the agent's sessions (the daemon's drain stops it, as SIGTERM does).</p>
  </div>`;
}

function Introspection({ config, reload }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const a2a = config.value && config.value.config && config.value.config.a2a;
  const on = a2a ? Boolean(a2a.introspection) : null;
  return html`<div class="panel">
    <h3>Introspection</h3>
    <p class="muted">debug.events and the other introspection ops, until the next reload of the configuration.</p>
    ${config.error && html`<p class="error">${config.error}</p>`}
    <div class="actions">
      <span id="introspection" data-on=${on === null ? "" : String(on)}>${on === null ? "unknown" : on ? "on" : "off"}</span>
      <${Act}
        label=${on ? "Turn off" : "Turn on"}
        cls="primary"
        data=${{ id: "introspection-toggle" }}
        act=${() => rootCommand("admin.set", { path: "a2a.introspection.enabled", value: !on })}
        busy=${busy || on === null}
        setBusy=${setBusy}
        onError=${setError}
        reload=${reload}
      />
    </div>
    ${error && html`<p class="error">${error}</p>`}
  </div>`;
}

function PendingRow({ item, reload }) {
  const [name, setName] = useState("");
  const [scope, setScope] = useState("user");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const common = { busy, setBusy, onError: setError, reload };
  const approve = () => {
    const args = { user_code: item.user_code, as: name.trim() };
    if (scope !== "user") args.scope = scope;
    return rootCommand("auth.device.approve", args);
  };
  return html`<tr class="device-pending" data-code=${item.user_code}>
    <td><code>${item.user_code}</code></td>
    <td>${item.client_id}</td>
    <td>${item.scope}</td>
    <td>${item.peer || ""}</td>
    <td class="muted">${when(item.requested_at)}</td>
    <td class="actions">
      <input type="text" class="device-name" placeholder="sign in as (name)" value=${name}
        onInput=${(e) => setName(e.target.value)} />
      ${item.scope === "operator" &&
      html`<select class="device-scope" value=${scope} onChange=${(e) => setScope(e.target.value)}>
        <option value="user">user</option><option value="operator">operator</option>
      </select>`}
      <${Act} label="Approve" cls="allow approve" act=${approve} ...${common} busy=${busy || !name.trim()} />
      <${Act} label="Deny" cls="deny" act=${() => rootCommand("auth.device.deny", { user_code: item.user_code })}
        ...${common} />
      ${error && html`<div class="error">${error}</div>`}
    </td>
  </tr>`;
}

function Pending({ pending, reload }) {
  const rows = (pending.value && pending.value.pending) || [];
  return html`<div class="panel">
    <h3>Device sign-ins waiting</h3>
    ${pending.error && html`<p class="error" id="pending-error">${pending.error}</p>`}
    ${!pending.error && rows.length === 0 && html`<p class="muted no-pending">No device sign-in is waiting.</p>`}
    ${rows.length > 0 &&
    html`<table class="device-pendings">
      <tr><th>code</th><th>client</th><th>asks</th><th>from</th><th>asked at</th><th></th></tr>
      ${rows.map((item) => html`<${PendingRow} key=${item.user_code} item=${item} reload=${reload} />`)}
    </table>`}
    <p class="muted">Approve only a code the person shows you; the name is who they become (one name, one principal).</p>
  </div>`;
}

function SessionRow({ row, reload }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const common = { busy, setBusy, onError: setError, reload };
  return html`<tr class="session" data-sid=${row.sid} data-name=${row.name || ""}>
    <td>${row.name || ""}</td>
    <td>${row.principal}</td>
    <td>${row.role}</td>
    <td>${row.kind}</td>
    <td>${row.client_id}</td>
    <td class="muted">${when(row.created_at)}</td>
    <td class="muted">${when(row.expires_at)}</td>
    <td>${row.approved_by}</td>
    <td class="actions">
      <${Act} label="Revoke" cls="deny revoke" act=${() => rootCommand("auth.sessions.revoke", { sid: row.sid })}
        ...${common} />
      ${error && html`<div class="error">${error}</div>`}
    </td>
  </tr>`;
}

function Sessions({ sessions, reload }) {
  const rows = (sessions.value && sessions.value.sessions) || [];
  return html`<div class="panel">
    <h3>Signed-in sessions</h3>
    ${sessions.error && html`<p class="error" id="sessions-error">${sessions.error}</p>`}
    ${!sessions.error && rows.length === 0 && html`<p class="muted no-sessions">No one is signed in by a session.</p>`}
    ${rows.length > 0 &&
    html`<table class="sessions">
      <tr><th>name</th><th>principal</th><th>role</th><th>kind</th><th>client</th><th>since</th><th>expires</th>
        <th>approved by</th><th></th></tr>
      ${rows.map((row) => html`<${SessionRow} key=${row.sid} row=${row} reload=${reload} />`)}
    </table>`}
  </div>`;
}

export function AdminPage({ principal, role }) {
  if (role !== "operator")
    return html`<main class="admin">
      <h2>Admin</h2>
      <p class="error" id="not-operator">This page is the operator's: the daemon refuses its actions to${" "}
        ${principal}.</p>
    </main>`;
  return html`<${OperatorAdmin} />`;
}

function OperatorAdmin() {
  const [nonce, setNonce] = useState(0);
  const reload = () => setNonce((n) => n + 1);
  const { value, error, loaded } = usePoll(load, REFRESH_MS, [nonce]);
  if (!loaded) return html`<main><p class="loading">Loading…</p></main>`;
  return html`<main class="admin">
    <h2>Admin</h2>
    ${error && html`<p class="error">${error.message}</p>`}
    ${value &&
    html`<${Agents} agents=${value.agents} status=${value.status} reload=${reload} />
      <${Introspection} config=${value.config} reload=${reload} />
      <${Pending} pending=${value.pending} reload=${reload} />
      <${Sessions} sessions=${value.sessions} reload=${reload} />`}
  </main>`;
}
