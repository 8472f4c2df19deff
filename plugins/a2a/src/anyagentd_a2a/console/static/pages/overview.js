// Overview: every agent GET /agents lists, with its state and — from the `status` command op on its path — its
// live agents and pool bound (the operator's `values`: absent for anyone else, and then not shown), paused/draining, uptime, conversations, and the tokens and cost its conversations spent
// since the daemon started (the operator's `values`); its tasks by state (ListTasks);
// and the latest tasks of every agent, each a link to its live conversation. Live: loaded at once (app.js may have
// started it with the shell's own requests), again when the push stream connects or resyncs, and again on each
// task change it tells (events.js; changes that come during a load are followed by one more load, not one per
// change).

import { command, listAgents, listTasks } from "../api.js";
import { useLive } from "../events.js";
import { html } from "../html.js";

/** Any task change: load again (the counts, the figures and the latest tasks all move with it). */
const reload = () => null;

function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}

export function short(state) {
  return (state || "").replace("TASK_STATE_", "").toLowerCase().replace("_", " ");
}

async function loadAgent(agent) {
  const [status, tasks] = await Promise.allSettled([command(agent.id, "status"), listTasks(agent.id, { pageSize: 100 })]);
  return {
    agent,
    status: status.status === "fulfilled" ? status.value : null,
    statusError: status.status === "rejected" ? status.reason.message : null,
    tasks: tasks.status === "fulfilled" ? tasks.value : null,
    tasksError: tasks.status === "rejected" ? tasks.reason.message : null,
  };
}

/** The page's listing (app.js may start it ahead: api.js `prefetch`). */
export async function load() {
  const listing = await listAgents();
  return Promise.all(listing.agents.map(loadAgent));
}

function AgentCard({ row }) {
  const { agent, status, tasks } = row;
  const values = (status && status.values) || {};
  const counts = {};
  for (const task of (tasks && tasks.tasks) || []) counts[task.status.state] = (counts[task.status.state] || 0) + 1;
  const spent = "costUsd" in values;
  return html`<div class="panel agent" data-agent=${agent.id}>
    <h3>${agent.id} <span class=${`badge ${agent.state}`}>${agent.state}</span>
      ${agent.default && html` <span class="badge">default</span>`}</h3>
    <div class="muted">${agent.name}</div>
    ${status &&
    html`<dl class="figures">
      ${"liveAgents" in values &&
      html`<dt>live agents</dt><dd class="live-agents">${values.liveAgents} of ${values.maxLive}</dd>`}
      <dt>paused</dt><dd>${status.paused ? "yes" : "no"}</dd>
      <dt>draining</dt><dd>${status.draining ? "yes" : "no"}</dd>
      <dt>uptime</dt><dd>${duration(status.uptime_ms)}</dd>
      <dt>conversations</dt><dd>${(status.conversations || []).length}</dd>
      <dt>workflow runs</dt><dd>${(status.runs || []).length}</dd>
      ${spent && html`<dt>tokens so far</dt><dd class="tokens">${values.tokensIn} in, ${values.tokensOut} out</dd>`}
      ${spent && html`<dt>cost so far</dt><dd class="cost">$${values.costUsd.toFixed(4)}</dd>`}
    </dl>`}
    ${row.statusError && html`<p class="error">status: ${row.statusError}</p>`}
    ${tasks &&
    html`<p class="task-counts">
      ${tasks.totalSize} task${tasks.totalSize === 1 ? "" : "s"}${Object.keys(counts).length ? ": " : ""}
      ${Object.entries(counts).map(([state, n]) => html`<span class=${`badge ${state}`}>${short(state)} ${n}</span> `)}
    </p>`}
    ${row.tasksError && html`<p class="error">tasks: ${row.tasksError}</p>`}
  </div>`;
}

export function Overview() {
  const { value, error, loaded, live } = useLive(load, reload, "overview");
  if (!loaded) return html`<main><p class="loading">Loading…</p></main>`;
  const rows = value || [];
  const latest = rows
    .flatMap((r) => ((r.tasks && r.tasks.tasks) || []).map((t) => ({ agent: r.agent.id, task: t })))
    .sort((a, b) => String(b.task.status.timestamp).localeCompare(String(a.task.status.timestamp)))
    .slice(0, 20);
  return html`<main>
    <h2>Overview <span class="badge live-state" data-live=${String(live)}>${live ? "live" : "reconnecting"}</span></h2>
    ${error && html`<p class="error">${error.message}</p>`}
    <div class="grid">${rows.map((row) => html`<${AgentCard} row=${row} />`)}</div>
    <div class="panel">
      <h3>Latest tasks</h3>
      ${latest.length === 0
        ? html`<p class="muted">No task yet.</p>`
        : html`<table class="tasks">
            <tr><th>agent</th><th>task</th><th>state</th><th>last update</th></tr>
            ${latest.map(
              ({ agent, task }) => html`<tr>
                <td>${agent}</td>
                <td><a href=${`#/task/${encodeURIComponent(agent)}/${encodeURIComponent(task.id)}`}>
                  <code>${task.id.slice(0, 8)}</code></a></td>
                <td><span class=${`badge ${task.status.state}`}>${short(task.status.state)}</span></td>
                <td class="muted">${task.status.timestamp || ""}</td>
              </tr>`,
            )}
          </table>`}
    </div>
  </main>`;
}
