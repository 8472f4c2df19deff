// Waiting for a person: every task in TASK_STATE_INPUT_REQUIRED on every agent, each with the agent's request as
// its status message carries it, answerable from here (RequestView). Live: listed (ListTasks filtered by state) at
// once and again when the push stream connects or resyncs, then kept by its task changes (events.js) — a task that
// starts waiting appears with the request the change carries, one that moves on goes.

import { listAgents, listTasks } from "../api.js";
import { stamp, useLive } from "../events.js";
import { html } from "../html.js";
import { RequestView } from "../request.js";
import { INPUT_REQUIRED, textOf, waitingRequest } from "../wire.js";

/** The page's listing (app.js may start it ahead: api.js `prefetch`). */
export async function load() {
  const listing = await listAgents();
  const pages = await Promise.all(
    listing.agents.map(async (agent) => {
      const page = await listTasks(agent.id, { state: INPUT_REQUIRED });
      return (page.tasks || []).map((task) => ({ agent: agent.id, task }));
    }),
  );
  return pages.flat();
}

/** The rows after task change `frame`: the task added or updated while it waits for input, else removed; a change
 * older than the row's status is ignored (a listing can be newer than changes queued before it). */
function apply(rows, frame) {
  const listed = rows || [];
  const at = listed.findIndex((r) => r.agent === frame.agent && r.task.id === frame.id);
  if (at >= 0 && stamp(frame.timestamp) < stamp(listed[at].task.status.timestamp)) return listed;
  const rest = listed.filter((_, i) => i !== at);
  if (frame.state !== INPUT_REQUIRED) return at >= 0 ? rest : listed;
  const status = { state: frame.state, timestamp: frame.timestamp, message: frame.message };
  const row = { agent: frame.agent, task: { id: frame.id, contextId: frame.contextId, status } };
  return [row, ...rest];
}

/** One key per request a task waits on: a second request of the same task gets fresh controls. */
function requestKey(task, request) {
  const opened = request && (request.Permission || request.Question);
  return `${task.id}:${(opened && opened.id) || ""}`;
}

function Waiting({ agent, task }) {
  const request = waitingRequest(task);
  const link = `#/task/${encodeURIComponent(agent)}/${encodeURIComponent(task.id)}`;
  return html`<div class="panel request waiting-task" data-task=${task.id} data-agent=${agent}>
    <div class="muted">
      agent <strong>${agent}</strong> · task <a href=${link}><code>${task.id.slice(0, 8)}</code></a>${" "}
      · ${request ? (request.Permission ? "asks permission" : "asks") : "waits for input"}${" "}
      · since ${task.status.timestamp || "?"}
    </div>
    ${request
      ? html`<${RequestView} key=${requestKey(task, request)} agent=${agent} task=${task} request=${request} />`
      : html`<p>${textOf(task.status.message) || "The agent waits for a message."}</p>`}
  </div>`;
}

export function WaitingPage() {
  const { value, error, loaded, live } = useLive(load, apply, "waiting");
  if (!loaded) return html`<main><p class="loading">Loading…</p></main>`;
  const rows = value || [];
  return html`<main>
    <h2>Waiting for a person <span class="badge live-state" data-live=${String(live)}>${live ? "live" : "reconnecting"}</span></h2>
    ${error && html`<p class="error">${error.message}</p>`}
    ${rows.length === 0
      ? html`<p class="muted nothing-waiting">No agent is waiting for an answer.</p>`
      : rows.map((row) => html`<${Waiting} key=${requestKey(row.task, waitingRequest(row.task))} ...${row} />`)}
  </main>`;
}
