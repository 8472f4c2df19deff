// Waiting for a person: every task in TASK_STATE_INPUT_REQUIRED on every agent (ListTasks filtered by state), each
// with the agent's request as its status message carries it, answerable from here (RequestView).

import { listAgents, listTasks } from "../api.js";
import { html } from "../html.js";
import { usePoll } from "../poll.js";
import { RequestView } from "../request.js";
import { INPUT_REQUIRED, textOf, waitingRequest } from "../wire.js";

const REFRESH_MS = 2000;

async function load() {
  const listing = await listAgents();
  const pages = await Promise.all(
    listing.agents.map(async (agent) => {
      const page = await listTasks(agent.id, { state: INPUT_REQUIRED });
      return (page.tasks || []).map((task) => ({ agent: agent.id, task }));
    }),
  );
  return pages.flat();
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
      agent <strong>${agent}</strong> · task <a href=${link}><code>${task.id.slice(0, 8)}</code></a>
      · ${request ? (request.Permission ? "asks permission" : "asks") : "waits for input"}
      · since ${task.status.timestamp || "?"}
    </div>
    ${request
      ? html`<${RequestView} key=${requestKey(task, request)} agent=${agent} task=${task} request=${request} />`
      : html`<p>${textOf(task.status.message) || "The agent waits for a message."}</p>`}
  </div>`;
}

export function WaitingPage() {
  const { value, error, loaded } = usePoll(load, REFRESH_MS);
  if (!loaded) return html`<main><p class="loading">Loading…</p></main>`;
  const rows = value || [];
  return html`<main>
    <h2>Waiting for a person</h2>
    ${error && html`<p class="error">${error.message}</p>`}
    ${rows.length === 0
      ? html`<p class="muted nothing-waiting">No agent is waiting for an answer.</p>`
      : rows.map((row) => html`<${Waiting} key=${requestKey(row.task, waitingRequest(row.task))} ...${row} />`)}
  </main>`;
}
