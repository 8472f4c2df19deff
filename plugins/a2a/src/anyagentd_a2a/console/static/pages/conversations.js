// Conversations: every conversation the caller may see on every agent, one row each — principal, contextId, agent,
// phase, last activity, est. tokens (the `status` op's estimate of its transcript's size, not the tokens the agent
// reported: the overview's) — filterable here (agent, principal, phase, text in the contextId), each row a link
// to its live conversation (#/task/{agent}/{latest task id}).
//
// Built per agent from the `status` op (its `conversations`: contextId, principal, turns, est_tokens, updated) and
// ListTasks grouped by contextId (the latest task: its id, state and status timestamp); a conversation with tasks
// and no status row (the engine retired it) still lists, without principal or tokens. The daemon decides what the
// caller sees: a user her own conversations, the operator everyone's. Live like the Waiting page: listed when the
// push stream connects or resyncs, then kept by its task changes (events.js) — a change of a listed conversation's
// latest task moves its phase in place; a new conversation, or a turn's end (its tokens moved), lists again.

import { command, listAgents, listTasks } from "../api.js";
import { stamp, useLive } from "../events.js";
import { html, useState } from "../html.js";
import { short } from "./overview.js";

/** What the tokens column is: the `status` op's `est_tokens`, not what the agent reported (the overview's). */
const EST_TOKENS = "an estimate of the conversation's transcript size in tokens (not the tokens the agent reported)";

const RUNNING = new Set(["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]);

async function loadAgent(agent) {
  const [status, tasks] = await Promise.all([command(agent, "status"), listTasks(agent, { pageSize: 100 })]);
  const latest = new Map(); // contextId → its latest task
  for (const task of tasks.tasks || []) {
    const seen = latest.get(task.contextId);
    if (!seen || stamp(task.status.timestamp) > stamp(seen.status.timestamp)) latest.set(task.contextId, task);
  }
  const rows = (status.conversations || []).map((c) => {
    const task = latest.get(c.contextId) || null;
    return {
      agent,
      contextId: c.contextId,
      principal: c.principal || null,
      turns: c.turns,
      tokens: c.est_tokens,
      updated: c.updated || 0,
      taskId: task ? task.id : null,
      state: task ? task.status.state : null,
      at: task ? stamp(task.status.timestamp) : 0,
    };
  });
  const listed = new Set(rows.map((r) => r.contextId));
  for (const [contextId, task] of latest) {
    if (listed.has(contextId)) continue;
    rows.push({
      agent,
      contextId,
      principal: null,
      turns: null,
      tokens: null,
      updated: 0,
      taskId: task.id,
      state: task.status.state,
      at: stamp(task.status.timestamp),
    });
  }
  return rows;
}

/** The page's listing (app.js may start it ahead: api.js `prefetch`). */
export async function load() {
  const listing = await listAgents();
  const settled = await Promise.allSettled(listing.agents.map((a) => loadAgent(a.id)));
  const errors = settled.filter((s) => s.status === "rejected").map((s) => s.reason.message);
  const rows = settled.flatMap((s) => (s.status === "fulfilled" ? s.value : []));
  return { rows, errors };
}

/** The rows after task change `frame`: a running task of a listed conversation moves its phase in place; anything
 * else (a new conversation, a turn's end: tokens and turns moved) lists again. */
function apply(value, frame) {
  if (!value || !RUNNING.has(frame.state)) return null;
  const at = value.rows.findIndex((r) => r.agent === frame.agent && r.contextId === frame.contextId);
  if (at < 0) return null;
  const row = value.rows[at];
  if (stamp(frame.timestamp) < row.at) return value; // older than what is listed
  const rows = value.rows.slice();
  rows[at] = { ...row, taskId: frame.id, state: frame.state, at: stamp(frame.timestamp) };
  return { ...value, rows };
}

const lastActivity = (row) => Math.max(row.at, row.updated || 0);

function when(ms) {
  return ms ? new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}

function Choice({ id, label, value, options, onChange }) {
  return html`<label>${label}
    <select id=${id} value=${value} onChange=${(e) => onChange(e.target.value)}>
      <option value="">any</option>
      ${options.map((o) => html`<option value=${o.value}>${o.label}</option>`)}
    </select></label>`;
}

const distinct = (values) => [...new Set(values)].sort();

export function ConversationsPage() {
  const { value, error, loaded, live } = useLive(load, apply, "conversations");
  const [filter, setFilter] = useState({ agent: "", principal: "", phase: "", text: "" });
  const set = (key) => (v) => setFilter((f) => ({ ...f, [key]: v }));
  if (!loaded) return html`<main><p class="loading">Loading…</p></main>`;
  const rows = ((value && value.rows) || []).slice().sort((a, b) => lastActivity(b) - lastActivity(a));
  const text = filter.text.trim().toLowerCase();
  const shown = rows.filter(
    (r) =>
      (!filter.agent || r.agent === filter.agent) &&
      (!filter.principal || (r.principal || "") === filter.principal) &&
      (!filter.phase || (r.state || "") === filter.phase) &&
      (!text || r.contextId.toLowerCase().includes(text)),
  );
  const principals = distinct(rows.map((r) => r.principal || ""));
  return html`<main>
    <h2>Conversations <span class="badge live-state" data-live=${String(live)}>${live ? "live" : "reconnecting"}</span></h2>
    ${error && html`<p class="error">${error.message}</p>`}
    ${((value && value.errors) || []).map((e) => html`<p class="error">${e}</p>`)}
    <div class="panel filters actions">
      <${Choice} id="filter-agent" label="agent " value=${filter.agent} onChange=${set("agent")}
        options=${distinct(rows.map((r) => r.agent)).map((a) => ({ value: a, label: a }))} />
      <${Choice} id="filter-principal" label="principal " value=${filter.principal} onChange=${set("principal")}
        options=${principals.map((p) => ({ value: p, label: p || "(unknown)" }))} />
      <${Choice} id="filter-phase" label="phase " value=${filter.phase} onChange=${set("phase")}
        options=${distinct(rows.map((r) => r.state || "")).map((s) => ({ value: s, label: s ? short(s) : "(none)" }))} />
      <label>contextId <input type="text" id="filter-text" placeholder="part of a contextId" value=${filter.text}
        onInput=${(e) => set("text")(e.target.value)} /></label>
      <span class="muted conversation-count">${shown.length} of ${rows.length}</span>
    </div>
    ${rows.length === 0
      ? html`<p class="muted no-conversations">No conversation yet.</p>`
      : html`<table class="conversations">
          <tr><th>principal</th><th>contextId</th><th>agent</th><th>phase</th><th>last activity</th><th title=${EST_TOKENS}>est. tokens</th><th>turns</th></tr>
          ${shown.map(
            (r) => html`<tr class="conversation" key=${r.agent + "/" + (r.principal || "") + "/" + r.contextId}
                data-agent=${r.agent} data-context=${r.contextId} data-principal=${r.principal || ""} data-state=${r.state || ""}>
              <td class="principal">${r.principal || html`<span class="muted">?</span>`}</td>
              <td>${r.taskId
                ? html`<a href=${`#/task/${encodeURIComponent(r.agent)}/${encodeURIComponent(r.taskId)}`}><code>${r.contextId}</code></a>`
                : html`<code>${r.contextId}</code>`}</td>
              <td class="agent">${r.agent}</td>
              <td>${r.state ? html`<span class=${`badge ${r.state}`}>${short(r.state)}</span>` : html`<span class="muted">—</span>`}</td>
              <td class="muted">${when(lastActivity(r))}</td>
              <td class="tokens" title=${EST_TOKENS}>${r.tokens ?? ""}</td>
              <td>${r.turns ?? ""}</td>
            </tr>`,
          )}
        </table>`}
  </main>`;
}
