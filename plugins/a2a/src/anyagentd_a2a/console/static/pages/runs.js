// Workflow runs: the list (`workflow.status`, every run the caller may see, with the `status` op's times and
// owners when it answers), and one run live — its steps with status, attempts, timings, errors and output, a step
// waiting on a signal with a control to send it (`workflow.signal {name, run, payload}`), a step waiting for an
// answer (an `ask` step) answerable in place by a SendMessage naming the run's task; and the run's actions: pause
// and resume (`admin.pause {run}`, `admin.resume {run}`), cancel (`admin.cancel {run}` for the operator,
// `workflow.cancel {run}` for its owner).
//
// Live: the page follows the run's A2A task with SubscribeToTask (each step change is a status update of that
// task) and reads `run.get` again on each update, on each action, and every BACKSTOP_MS in case a change came
// that the task does not stream (a pause, say). `run.get` is an introspection op: with `[a2a] introspection`
// off the page shows the run's `workflow.status` summary and says why the steps are missing.

import { command, listAgents, subscribe } from "../api.js";
import { html, useEffect, useRef, useState } from "../html.js";
import { usePoll } from "../poll.js";
import { RequestView } from "../request.js";
import { TERMINAL } from "../wire.js";
import { allowedOps, clock, may, shown, took } from "./allowed.js";

const LIST_MS = 3000;
const BACKSTOP_MS = 15000;
const RUN_TERMINAL = new Set(["completed", "failed", "refused", "cancelled", "stalled"]);

export function runLink(id) {
  return `#/run/${encodeURIComponent(id)}`;
}

async function loadRuns() {
  const listing = await listAgents();
  const agent = listing.default;
  const [runs, status] = await Promise.allSettled([command(agent, "workflow.status"), command(agent, "status")]);
  if (runs.status === "rejected") throw runs.reason;
  const more = new Map(
    ((status.status === "fulfilled" && status.value && status.value.runs) || []).map((r) => [r.id, r]),
  );
  const rows = runs.value.runs.map((r) => ({ ...r, more: more.get(r.run) || null }));
  rows.sort((a, b) => ((b.more && b.more.created) || 0) - ((a.more && a.more.created) || 0));
  const workflows = (status.status === "fulfilled" && status.value && status.value.workflows) || [];
  return { rows, workflows };
}

function RunRow({ row }) {
  const more = row.more || {};
  const steps = more.steps ? Object.keys(more.steps).length : null;
  return html`<tr class="run-row" data-run=${row.run} data-status=${row.status}>
    <td><a href=${runLink(row.run)}><code>${row.run}</code></a></td>
    <td>${row.workflow}</td>
    <td><span class=${`badge run-${row.status}`}>${row.status}</span></td>
    <td class="muted">${more.principal || ""}</td>
    <td class="muted">${steps === null ? "" : steps}</td>
    <td class="muted">${clock(more.created)}</td>
    <td class="muted">${more.updated ? clock(more.updated) : ""}</td>
    <td>${row.error ? html`<span class="error">${row.error}</span>` : ""}</td>
  </tr>`;
}

export function RunsPage() {
  const { value, error, loaded } = usePoll(loadRuns, LIST_MS);
  if (!loaded) return html`<main><p class="loading">Loading…</p></main>`;
  const { rows, workflows } = value || { rows: [], workflows: [] };
  return html`<main>
    <h2>Workflow runs</h2>
    ${error && html`<p class="error">${error.message}</p>`}
    ${workflows.length > 0 &&
    html`<p class="muted">Workflows configured: ${workflows.map((w) => html`<code>${w.name}</code> `)}</p>`}
    <div class="panel">
      ${rows.length === 0
        ? html`<p class="muted no-runs">No workflow run yet.</p>`
        : html`<table class="runs">
            <tr><th>run</th><th>workflow</th><th>status</th><th>principal</th><th>steps</th><th>created</th>
              <th>updated</th><th>error</th></tr>
            ${rows.map((row) => html`<${RunRow} key=${row.run} row=${row} />`)}
          </table>`}
    </div>
  </main>`;
}

// ------------------------------------------------------------------------------------------------ one run

function Waiting({ wait }) {
  if (!wait) return "";
  if (wait.on === "signal") {
    const until = wait.timeout_ms ? ` (at most ${took(1, 1 + wait.timeout_ms)})` : "";
    return html`<span class="wait">waits for signal <code class="signal-name">${wait.signal}</code>${until}</span>`;
  }
  if (wait.on === "input") return html`<span class="wait">waits for an answer</span>`;
  return html`<span class="wait">waits: <code>${JSON.stringify(wait)}</code></span>`;
}

function SignalControl({ runId, name, onSent }) {
  const [payload, setPayload] = useState("");
  const [busy, setBusy] = useState(false);
  const [said, setSaid] = useState(null);
  const send = async () => {
    setBusy(true);
    setSaid(null);
    const args = { name, run: runId };
    const text = payload.trim();
    if (text) {
      try {
        args.payload = JSON.parse(text);
      } catch {
        args.payload = text; // not JSON: the words themselves
      }
    }
    try {
      const result = await command(await defaultAgent(), "workflow.signal", args);
      setSaid({ ok: true, text: `delivered to ${result ? result.delivered : "?"} step(s)` });
      onSent();
    } catch (err) {
      setSaid({ ok: false, text: err.message });
    }
    setBusy(false);
  };
  return html`<div class="actions signal-control" data-signal=${name}>
    <input type="text" class="signal-payload" placeholder="payload (JSON or text, optional)" value=${payload}
      onInput=${(e) => setPayload(e.target.value)} />
    <button class="primary send-signal" disabled=${busy} onClick=${send}>Send signal ${name}</button>
    ${said && html`<span class=${said.ok ? "muted signal-said" : "error"}>${said.text}</span>`}
  </div>`;
}

function StepRow({ id, step, run, task, allowed, onChanged }) {
  const wait = step.status === "suspended" ? step.wait : null;
  const asking = wait && wait.on === "input" && wait.request && task && task.status.state === "TASK_STATE_INPUT_REQUIRED";
  return html`<tr class="step" data-step=${id} data-status=${step.status}>
    <td><code>${id}</code></td>
    <td><span class=${`badge step-${step.status}`}>${step.status}</span></td>
    <td class="attempt">${step.attempt}</td>
    <td class="muted">${step.started ? `${clock(step.started)} · ${took(step.started, step.finished)}` : ""}</td>
    <td>
      <${Waiting} wait=${wait} />
      ${step.error && html`<div class="error step-error">${step.error}</div>`}
      ${step.output !== null && step.output !== undefined && html`<pre class="output">${shown(step.output)}</pre>`}
      ${wait && wait.on === "signal" && may(allowed, "workflow.signal") &&
      html`<${SignalControl} runId=${run.id} name=${wait.signal} onSent=${onChanged} />`}
      ${asking &&
      html`<${RequestView} key=${`${task.id}:${id}`} agent=${task.agent} task=${task} request=${wait.request}
        onAnswered=${onChanged} />`}
    </td>
  </tr>`;
}

let defaultAgentId = null;
async function defaultAgent() {
  if (!defaultAgentId) defaultAgentId = (await listAgents()).default;
  return defaultAgentId;
}

function Actions({ run, summary, allowed, onChanged }) {
  const [busy, setBusy] = useState(null);
  const [error, setError] = useState(null);
  const status = (run || summary || {}).status;
  const id = (run && run.id) || (summary && summary.run);
  if (!status || RUN_TERMINAL.has(status)) return "";
  const act = async (name, op, args) => {
    setBusy(name);
    setError(null);
    try {
      await command(await defaultAgent(), op, args);
    } catch (err) {
      setError(`${name}: ${err.message}`);
    }
    setBusy(null);
    onChanged();
  };
  const cancelOp = may(allowed, "admin.cancel") ? "admin.cancel" : "workflow.cancel";
  const cancelArgs = cancelOp === "admin.cancel" ? { run: id, reason: "cancelled from the console" } : { run: id };
  return html`<div class="actions run-actions">
    ${status === "paused"
      ? may(allowed, "admin.resume") &&
        html`<button id="run-resume" disabled=${busy} onClick=${() => act("resume", "admin.resume", { run: id })}>
          Resume</button>`
      : may(allowed, "admin.pause") &&
        html`<button id="run-pause" disabled=${busy}
          onClick=${() => act("pause", "admin.pause", { run: id, reason: "paused from the console" })}>Pause</button>`}
    ${(may(allowed, "admin.cancel") || may(allowed, "workflow.cancel")) &&
    html`<button id="run-cancel" class="deny" disabled=${busy} onClick=${() => act("cancel", cancelOp, cancelArgs)}>
      Cancel run</button>`}
    ${busy && html`<span class="muted">${busy}…</span>`}
    ${error && html`<span class="error">${error}</span>`}
  </div>`;
}

/** One run, live (see the module's comment). */
export function RunPage({ runId }) {
  const [view, setView] = useState({ run: null, summary: null, task: null, live: false, error: null, note: null });
  const [allowed, setAllowed] = useState(undefined);
  const refreshRef = useRef(() => {});
  useEffect(() => {
    const abort = new AbortController();
    let agent = null;
    let run = null;
    let reading = null; // the run.get under way, and whether another is wanted after it
    let again = false;
    let timer = null;
    const set = (patch) => !abort.signal.aborted && setView((v) => ({ ...v, ...patch }));
    const readOnce = async () => {
      try {
        run = (await command(agent, "run.get", { run: runId })).run;
        set({ run, error: null });
      } catch (err) {
        if (err.reason !== "INTROSPECTION_DISABLED") {
          set({ error: err.message });
          return;
        }
        const [summary] = (await command(agent, "workflow.status", { run: runId })).runs;
        run = null;
        set({
          summary,
          note: "The steps are shown when introspection is on ([a2a] introspection = true): run.get is off.",
        });
      }
    };
    const refresh = async () => {
      if (reading) {
        again = true;
        return reading;
      }
      reading = (async () => {
        do {
          again = false;
          await readOnce().catch((err) => set({ error: err.message }));
        } while (again && !abort.signal.aborted);
        reading = null;
      })();
      return reading;
    };
    refreshRef.current = refresh;
    const ended = () => run && RUN_TERMINAL.has(run.status);
    const backstop = () => {
      clearTimeout(timer);
      timer = setTimeout(async () => {
        if (abort.signal.aborted) return;
        await refresh();
        if (!ended()) backstop();
      }, BACKSTOP_MS);
    };
    // the run's task lives on the agent it was started through: the default one first, then the others
    const follow = async (taskId, agents) => {
      let task = null;
      let taskAgent = null;
      const onResult = (result) => {
        if (result.task) task = { ...result.task, agent: taskAgent };
        else if (result.statusUpdate) task = { ...task, status: result.statusUpdate.status };
        set({ task, live: true });
        refresh();
        backstop();
      };
      for (const candidate of agents) {
        taskAgent = candidate;
        while (!abort.signal.aborted) {
          try {
            await subscribe(candidate, taskId, onResult, abort.signal);
          } catch (err) {
            if (abort.signal.aborted) return;
            if (err.status === 404 || err.code === -32001) break; // not this agent's task (or gone): the next
            set({ live: false });
            await refresh();
            return; // an ended task cannot be subscribed to
          }
          set({ live: false });
          await refresh();
          if (!task || TERMINAL.has(task.status.state) || ended()) return;
          await new Promise((resolve) => setTimeout(resolve, 1000)); // the stream ended early: again
        }
        if (task) return;
      }
    };
    (async () => {
      try {
        const listing = await listAgents();
        agent = listing.default;
        defaultAgentId = agent;
        allowedOps(agent).then((ops) => !abort.signal.aborted && setAllowed(ops));
        await refresh();
        backstop();
        const taskId = run && run.task;
        if (taskId && !ended()) {
          await follow(taskId, [agent, ...listing.agents.map((a) => a.id).filter((id) => id !== agent)]);
        }
      } catch (err) {
        set({ error: err.message });
      }
    })();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [runId]);
  const { run, summary, task, live, error, note } = view;
  const status = (run || summary || {}).status;
  const changed = () => refreshRef.current();
  return html`<main class="run-page" data-run=${runId}>
    <h2>Run <code>${runId}</code>${run ? html` · ${run.workflow}` : summary ? html` · ${summary.workflow}` : ""}</h2>
    ${status &&
    html`<p>
      <span class=${`badge run-${status} run-status`} data-status=${status}>${status}</span>
      <span class=${`muted run-live`} data-live=${live ? "yes" : "no"}>${live ? " · live" : ""}</span>
      ${run && html`<span class="muted"> · started by ${run.principal || "?"} at ${clock(run.created)}
        ${run.finished ? ` · ended after ${took(run.created, run.finished)}` : ""} · ${run.tokens} tokens</span>`}
    </p>`}
    ${error && html`<p class="error">${error}</p>`}
    ${note && html`<p class="muted">${note}</p>`}
    <${Actions} run=${run} summary=${summary} allowed=${allowed} onChanged=${changed} />
    ${run &&
    html`<div class="panel">
      <h3>Steps</h3>
      <table class="steps">
        <tr><th>step</th><th>status</th><th>attempt</th><th>started · took</th><th>output</th></tr>
        ${Object.entries(run.steps).map(
          ([id, step]) => html`<${StepRow} key=${id} id=${id} step=${step} run=${run} task=${task} allowed=${allowed}
            onChanged=${changed} />`,
        )}
      </table>
    </div>`}
    ${(run || summary) &&
    html`<div class="panel">
      <h3>Outcome</h3>
      ${(run || summary).error && html`<p class="error run-error">${(run || summary).error}</p>`}
      ${(run || summary).output !== null && (run || summary).output !== undefined
        ? html`<pre class="run-output">${shown((run || summary).output)}</pre>`
        : html`<p class="muted">No output yet.</p>`}
      ${run && Object.keys(run.vars || {}).length > 0 &&
      html`<div class="muted">inputs</div><pre class="run-vars">${shown(run.vars)}</pre>`}
      ${run && run.task && task &&
      html`<p class="muted">task <a href=${`#/task/${encodeURIComponent(task.agent)}/${encodeURIComponent(run.task)}`}>
        <code>${run.task.slice(0, 8)}</code></a></p>`}
    </div>`}
  </main>`;
}
