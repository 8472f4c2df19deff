// What this page's caller may do, for the runs and subagents pages: the command ops its extended card lists (the
// card narrows `params.ops` to what the caller may run, and leaves out ops whose switch is off, such as run.get
// and subagent.get without introspection); and small helpers those pages share.

import { COMMAND_URI, rpc } from "../api.js";

const cards = new Map(); // agent → Promise<Set<op>>

/** The ops agent `agent`'s extended card lets this caller run (a Set; null when the card could not be read —
 * then the pages offer every action and show the daemon's refusal). */
export async function allowedOps(agent) {
  if (!cards.has(agent)) {
    const asked = rpc(agent, "GetExtendedAgentCard", {}).then(
      (card) => {
        const extensions = (card.capabilities && card.capabilities.extensions) || [];
        const command = extensions.find((e) => e.uri === COMMAND_URI);
        const ops = (command && command.params && command.params.ops) || [];
        return new Set(ops.map((o) => o.op));
      },
      () => {
        cards.delete(agent);
        return null;
      },
    );
    cards.set(agent, asked);
  }
  return cards.get(agent);
}

/** Whether `allowed` (allowedOps' answer) lets the caller run `op`; unknown (null) counts as yes. */
export function may(allowed, op) {
  return allowed === null || allowed === undefined || allowed.has(op);
}

/** A JSON value for a person: strings as they are, anything else as indented JSON. */
export function shown(value) {
  if (value === null || value === undefined) return "";
  return typeof value === "string" ? value : JSON.stringify(value, null, 1);
}

/** An epoch-ms time as the local clock shows it ("" for none). */
export function clock(ms) {
  return ms ? new Date(ms).toLocaleTimeString() : "";
}

/** How long from `from` to `to` (epoch ms; to = now when null), "" when `from` is none. */
export function took(from, to) {
  if (!from) return "";
  const ms = Math.max(0, (to || Date.now()) - from);
  return ms < 1000 ? `${ms} ms` : ms < 60000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60000)} min`;
}
