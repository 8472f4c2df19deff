// Reading the agent's work out of A2A messages: the daemon puts each engine event in a text part of media type
// application/vnd.anyagent.event+json holding the wire's own Event JSON (reasoning in
// application/vnd.anyagent.reasoning+json), and the response text in the "response" artifact. A permission or a
// question is a status message whose event part is a RequestOpened ({"Permission": …} or {"Question": …}).
//
// The transcript is a list of entries built by `Transcript.add…` in arrival order: user text, agent text (response
// chunks), reasoning, tool calls (one entry per tool id, updated in place), plan, requests, usage, turn ends.

export const EVENT_TYPE = "application/vnd.anyagent.event+json";
export const INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED";
export const TERMINAL = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED",
]);

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** The wire events ({sequence, kind: {Name: value}, …}) of an A2A message's event parts, in order. */
export function eventsOf(message) {
  const found = [];
  for (const part of (message && message.parts) || []) {
    if (part.mediaType === EVENT_TYPE) {
      const event = part.text !== undefined ? parsed(part.text) : part.data;
      if (event && event.kind) found.push(event);
    }
  }
  return found;
}

/** The request ({"Permission": {...}} or {"Question": {...}}) a message's RequestOpened event opens, or null. */
export function requestOf(message) {
  for (const event of eventsOf(message)) {
    if (event.kind.RequestOpened) return event.kind.RequestOpened;
  }
  return null;
}

/** The request a task waiting for input waits on: its status message's, else the newest agent message of its
 * history that opens one (the daemon's own rule, translate.asking_message). */
export function waitingRequest(task) {
  if (!task || task.status.state !== INPUT_REQUIRED) return null;
  const own = requestOf(task.status.message);
  if (own) return own;
  for (const message of [...(task.history || [])].reverse()) {
    if (message.role === "ROLE_AGENT" && requestOf(message)) return requestOf(message);
  }
  return null;
}

/** The plain text parts of a message, joined. */
export function textOf(message) {
  return ((message && message.parts) || [])
    .filter((p) => p.text !== undefined && !p.mediaType)
    .map((p) => p.text)
    .join("");
}

const OPTION_LABELS = {
  AllowOnce: "Allow once",
  AllowAlways: "Allow always",
  DenyOnce: "Deny",
  DenyAlways: "Deny always",
};

/** The button label of a permission option. */
export function optionLabel(option) {
  return OPTION_LABELS[option] || option;
}

/** A transcript under construction: `entries` (a fresh array after each change, for rendering). */
export class Transcript {
  constructor() {
    this.entries = [];
    this.tools = new Map(); // tool id → index in entries
    this.lastText = -1; // index of the agent text entry response chunks append to, -1 when none is open
    this.seen = new Set(); // event sequences already shown (a task's history and its stream overlap)
  }

  push(entry) {
    this.entries = [...this.entries, entry];
    return this.entries.length - 1;
  }

  replace(index, entry) {
    const next = [...this.entries];
    next[index] = entry;
    this.entries = next;
  }

  /** A whole task (GetTask, or a stream's first result): its history, its response artifact, its status. */
  addTask(task) {
    for (const message of task.history || []) this.addMessage(message, null);
    for (const artifact of task.artifacts || []) {
      this.addArtifact({ artifact, append: false });
    }
    this.addMessage(task.status.message, task.status.state);
  }

  /** One message: a user's text, or an agent's events and reasoning (its plain text only when it says what no
   * event says: not a completed turn's summary, not a request's words). */
  addMessage(message, state) {
    if (!message) return;
    if (message.role === "ROLE_USER") {
      const data = (message.parts || []).find((p) => p.data !== undefined);
      const text = textOf(message) || (data ? JSON.stringify(data.data) : "");
      if (text) this.push({ kind: "user", text });
      this.lastText = -1;
      return;
    }
    for (const part of message.parts || []) {
      if ((part.mediaType || "").includes("reasoning")) {
        const value = parsed(part.text) || {};
        const delta = value.ReasoningDelta;
        if (delta) this.push({ kind: "reasoning", text: delta.text });
      }
    }
    const events = eventsOf(message);
    for (const event of events) this.addEvent(event);
    const text = textOf(message);
    const opensRequest = events.some((e) => e.kind.RequestOpened);
    if (text && !opensRequest && state !== "TASK_STATE_COMPLETED" && state !== null) {
      this.push({ kind: "note", text, state });
    }
  }

  /** One wire event. */
  addEvent(event) {
    if (event.sequence !== undefined) {
      const key = `${event.session_id}:${event.sequence}`;
      if (this.seen.has(key)) return;
      this.seen.add(key);
    }
    const [name, value] = Object.entries(event.kind)[0];
    if (name === "ToolUpdated") {
      const entry = { kind: "tool", tool: value };
      if (this.tools.has(value.id)) this.replace(this.tools.get(value.id), entry);
      else this.tools.set(value.id, this.push(entry));
      this.lastText = -1;
    } else if (name === "PlanUpdated") {
      this.push({ kind: "plan", entries: value.entries || [] });
    } else if (name === "RequestOpened") {
      this.push({ kind: "request", request: value });
      this.lastText = -1;
    } else if (name === "ContextUsage") {
      this.push({ kind: "usage", usage: value });
    } else if (name === "TurnEnded") {
      const stop = value && value.stop;
      const how = stop && typeof stop === "object" ? Object.keys(stop)[0] : String(stop || "");
      this.push({ kind: "event", text: `turn ended: ${how}` });
    } else if (name === "RequestClosed") {
      this.push({ kind: "event", text: "request answered" });
    } else if (!["MessageEnded", "TextDelta", "ReasoningDelta"].includes(name)) {
      this.push({ kind: "event", text: name });
    }
  }

  /** A response artifact chunk ({artifact, append}): agent text, appended to the open text entry. */
  addArtifact(update) {
    const text = (update.artifact.parts || []).map((p) => p.text || "").join("");
    if (!text) return;
    if (update.append && this.lastText >= 0) {
      const entry = this.entries[this.lastText];
      this.replace(this.lastText, { ...entry, text: entry.text + text });
    } else {
      this.lastText = this.push({ kind: "text", text });
    }
  }
}
