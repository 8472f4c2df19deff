// Subagents: who spawned what, its status, attempts, tokens, instruction and output; Kill (`subagent.kill`).
//
// The command extension has no op listing subagents, so the page gathers their handles where the daemon names
// them: the steps of the caller's workflow runs (a `subagent` step's output is `{handle, result?}`; `run.get`),
// the running subagents of the `status` op's activity (their id is the handle), and handles the person looks up
// here (kept in this tab's session storage). Each is then read with `subagent.get` (introspection on: who
// requested it, depth, instruction, attempts, tokens, result, error), else `subagent.status` (status, mode,
// result, error). Another principal's subagent is "no such subagent" to a user, so a user sees only their own.

import { command, listAgents } from "../api.js";
import { html, useState } from "../html.js";
import { usePoll } from "../poll.js";
import { allowedOps, clock, may, shown } from "./allowed.js";
import { runLink } from "./runs.js";

const REFRESH_MS = 3000;
const ENDED = new Set(["completed", "failed", "cancelled"]);
const LOOKED_UP = "anyagentd.console.subagents";
const RUN_TERMINAL = new Set(["completed", "failed", "refused", "cancelled", "stalled"]);
const endedRuns = new Map(); // run id → its subagent steps, for runs that can change no more

const lookedUp = {
  get: () => JSON.parse(sessionStorage.getItem(LOOKED_UP) || "[]"),
  add: (handle) => sessionStorage.setItem(LOOKED_UP, JSON.stringify([...new Set([...lookedUp.get(), handle])])),
  drop: (handle) => sessionStorage.setItem(LOOKED_UP, JSON.stringify(lookedUp.get().filter((h) => h !== handle))),
};

/** [{handle, run, step}] of the subagent steps of `run` (run.get). */
async function spawnedBy(agent, summary) {
  if (endedRuns.has(summary.run)) return endedRuns.get(summary.run);
  const { run } = await command(agent, "run.get", { run: summary.run });
  const found = Object.entries(run.steps)
    .filter(([, step]) => step.output && typeof step.output === "object" && typeof step.output.handle === "string")
    .map(([step, state]) => ({ handle: state.output.handle, run: run.id, step }));
  if (RUN_TERMINAL.has(run.status)) endedRuns.set(run.id, found);
  return found;
}

async function readOne(agent, handle, introspect) {
  if (introspect) {
    try {
      return { ...(await command(agent, "subagent.get", { handle })).subagent, full: true };
    } catch (err) {
      if (err.reason !== "INTROSPECTION_DISABLED") throw err;
    }
  }
  return { ...(await command(agent, "subagent.status", { handle })), full: false };
}

async function load() {
  const agent = (await listAgents()).default;
  const allowed = await allowedOps(agent);
  const origins = new Map(); // handle → {run, step} or {running: true} or {lookedUp: true}
  const notes = [];
  if (may(allowed, "workflow.status")) {
    const { runs } = await command(agent, "workflow.status");
    if (may(allowed, "run.get")) {
      const steps = await Promise.allSettled(runs.slice(0, 100).map((r) => spawnedBy(agent, r)));
      for (const got of steps) {
        if (got.status === "fulfilled") for (const s of got.value) origins.set(s.handle, { run: s.run, step: s.step });
      }
    } else {
      notes.push("Subagents spawned by workflow runs are found when introspection is on (run.get is off).");
    }
  }
  try {
    const status = await command(agent, "status");
    for (const row of status.activity || []) {
      if (String(row.id).startsWith("sa-") && !origins.has(row.id)) origins.set(row.id, { running: true });
    }
  } catch {}
  for (const handle of lookedUp.get()) if (!origins.has(handle)) origins.set(handle, { lookedUp: true });
  const introspect = may(allowed, "subagent.get");
  const rows = await Promise.all(
    [...origins.entries()].map(async ([handle, origin]) => {
      try {
        return { handle, origin, record: await readOne(agent, handle, introspect), error: null };
      } catch (err) {
        return { handle, origin, record: null, error: err.message };
      }
    }),
  );
  rows.sort((a, b) => ((b.record && b.record.created) || 0) - ((a.record && a.record.created) || 0));
  return { agent, allowed, rows, notes };
}

function Origin({ origin, record }) {
  const parts = [];
  if (origin.run)
    parts.push(html`<span class="spawned-by">run <a href=${runLink(origin.run)}><code>${origin.run}</code></a>${" "}· step <code>${origin.step}</code></span>`);
  if (record && record.requested_by && record.requested_by !== origin.run)
    parts.push(html`<span class="requested-by">requested by <code>${record.requested_by}</code></span>`);
  if (record && record.node) parts.push(html`<span class="muted">depth ${record.node}</span>`);
  if (!parts.length && origin.running) parts.push(html`<span class="muted">a running subagent</span>`);
  if (!parts.length && origin.lookedUp) parts.push(html`<span class="muted">looked up</span>`);
  return html`<div>${parts.map((p) => html`<div>${p}</div>`)}</div>`;
}

function Kill({ agent, handle, onDone }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const kill = async () => {
    setBusy(true);
    setError(null);
    try {
      await command(agent, "subagent.kill", { handle, reason: "killed from the console" });
      onDone();
    } catch (err) {
      setError(err.message);
      setBusy(false);
    }
  };
  return html`<span><button class="deny kill" disabled=${busy} onClick=${kill}>Kill</button>
    ${error && html`<span class="error">${error}</span>`}</span>`;
}

function Row({ row, agent, allowed, onChanged }) {
  const { handle, origin, record, error } = row;
  const status = record ? record.status : "unknown";
  return html`<tr class="subagent" data-handle=${handle} data-status=${status}>
    <td><code>${handle}</code>${record && record.mode && html`<div class="muted">${record.mode}</div>`}</td>
    <td><${Origin} origin=${origin} record=${record} /></td>
    <td><span class=${`badge subagent-${status}`}>${status}</span>
      ${record && record.full && html`<div class="muted">attempt ${record.attempt} · ${record.tokens} tokens</div>`}
      ${record && record.updated && html`<div class="muted">${clock(record.updated)}</div>`}</td>
    <td>
      ${record && record.instruction && html`<div class="instruction">${shown(record.instruction)}</div>`}
      ${record && record.result !== null && record.result !== undefined &&
      html`<pre class="output">${shown(record.result)}</pre>`}
      ${record && record.error && html`<div class="error subagent-error">${record.error}</div>`}
      ${error && html`<div class="error">${error}</div>`}
    </td>
    <td>
      ${record && !ENDED.has(status) && may(allowed, "subagent.kill") &&
      html`<${Kill} agent=${agent} handle=${handle} onDone=${onChanged} />`}
      ${origin.lookedUp &&
      html`<button class="forget" onClick=${() => { lookedUp.drop(handle); onChanged(); }}>Forget</button>`}
    </td>
  </tr>`;
}

function LookUp({ onAdded }) {
  const [value, setValue] = useState("");
  const add = () => {
    const handle = value.trim();
    if (!handle) return;
    lookedUp.add(handle);
    setValue("");
    onAdded();
  };
  return html`<div class="actions">
    <input type="text" id="subagent-handle" placeholder="a subagent handle (sa-…)" value=${value}
      onInput=${(e) => setValue(e.target.value)} onKeyDown=${(e) => e.key === "Enter" && add()} />
    <button id="subagent-look-up" onClick=${add}>Look up</button>
  </div>`;
}

export function SubagentsPage() {
  const [tick, setTick] = useState(0);
  const again = () => setTick((t) => t + 1);
  const { value, error, loaded } = usePoll(load, REFRESH_MS, [tick]);
  const { agent, allowed, rows, notes } = value || { agent: null, allowed: null, rows: [], notes: [] };
  return html`<main>
    <h2>Subagents</h2>
    ${error && html`<p class="error">${error.message}</p>`}
    ${notes.map((n) => html`<p class="muted">${n}</p>`)}
    <div class="panel">
      ${!loaded
        ? html`<p class="loading">Loading…</p>`
        : rows.length === 0
          ? html`<p class="muted no-subagents">No subagent found.</p>`
          : html`<table class="subagents">
              <tr><th>handle</th><th>spawned by</th><th>status</th><th>instruction · output</th><th></th></tr>
              ${rows.map((row) => html`<${Row} key=${row.handle} row=${row} agent=${agent} allowed=${allowed}
                onChanged=${again} />`)}
            </table>`}
      <${LookUp} onAdded=${again} />
    </div>
  </main>`;
}
