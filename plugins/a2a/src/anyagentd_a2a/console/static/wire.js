// Reading the agent's work out of A2A messages: the daemon puts each engine event in a text part of media type
// application/vnd.anyagent.event+json holding the wire's own Event JSON (reasoning in
// application/vnd.anyagent.reasoning+json), and the response text in the "response" artifact. A permission or a
// question is a status message whose event part is a RequestOpened ({"Permission": …} or {"Question": …}).
//
// The transcript is a list of entries built by `Transcript.add…` in arrival order: user text, agent text (response
// chunks), reasoning, tool calls (one entry per tool id, updated in place), plan, requests, usage, turn ends.
// A whole task (GetTask) is read the same way: its history in order, the response text placed among it where it
// was said (`placeText`), each answer shown in words where its request closed (`answerText`).

export const EVENT_TYPE = "application/vnd.anyagent.event+json";
export const RESPONSE_ARTIFACT = "response";
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

/** What an answer said, for a person: "you allowed (always)", "you denied", "you answered: Klingon" (a choice by
 * its label when the request is known); "request answered" when the answer is not known (another client's). */
export function answerText(request, answer) {
  if (!answer) return "request answered";
  if (answer.Permission !== undefined) {
    return (
      {
        AllowOnce: "you allowed (once)",
        AllowAlways: "you allowed (always)",
        DenyOnce: "you denied",
        DenyAlways: "you denied (always)",
      }[answer.Permission] || `you answered: ${answer.Permission}`
    );
  }
  const questions = (request && request.Question && request.Question.questions) || [];
  const said = (answer.Question || []).map((given, i) => {
    if (given == null) return "";
    if (typeof given === "string") return given;
    if (given.Text !== undefined) return String(given.Text);
    if (given.Choices !== undefined) {
      const choices = (questions[i] && questions[i].choices) || [];
      return given.Choices.map((id) => (choices.find((c) => c.id === id) || { label: id }).label).join(", ");
    }
    return JSON.stringify(given);
  });
  return `you answered: ${said.filter((s) => s).join("; ")}`;
}

function sequenced(message) {
  const events = eventsOf(message).filter((e) => typeof e.sequence === "number");
  if (!events.length) return null;
  const first = events[0];
  const last = events[events.length - 1];
  return { session: first.session_id, first: first.sequence, last: last.sequence, lastKind: Object.keys(last.kind)[0] };
}

/** Where a task's response text goes among its messages (history, then the status message): the number of the
 * response artifact's `count` chunks to say before each message (the rest after the last). The daemon keeps the
 * agent's text only in that artifact, one part per TextDelta, and each status message carries its wire events
 * with their session sequence numbers — so every chunk took one sequence number of a gap between two messages'
 * events. The chunks are placed from the last gap back, each gap taking what fits in it: its free numbers less
 * what else took some there (a MessageEnded ending the text, the status change after a request closed, two for
 * each reasoning message); none while a request was open (the agent waits) nor after the end of an ended task;
 * the first gap (the turn's start is not known) and the open end of a running task take any number. */
export function placeText(messages, count, ended) {
  const before = messages.map(() => 0);
  if (!count) return before;
  const gaps = []; // {at: index of the message the text goes before (messages.length: after the last), room}
  let previous = null;
  let reasoning = 0;
  messages.forEach((message, i) => {
    const seq = sequenced(message);
    if (!seq) {
      if (((message && message.parts) || []).some((p) => (p.mediaType || "").includes("reasoning"))) reasoning += 1;
      return;
    }
    gaps.push({ at: i, room: room(previous, seq, reasoning) });
    previous = seq;
    reasoning = 0;
  });
  const waiting = previous && previous.lastKind === "RequestOpened";
  const last = messages.length - 1;
  if (ended && last >= 0 && !sequenced(messages[last])) {
    gaps.push({ at: last, room: previous ? room(previous, { ...previous, first: Infinity }, reasoning) : Infinity });
  } else {
    gaps.push({ at: messages.length, room: waiting || ended ? 0 : Infinity });
  }
  let left = count;
  const taken = gaps.map(() => 0);
  for (let g = gaps.length - 1; g >= 0 && left > 0; g -= 1) {
    taken[g] = Math.min(left, gaps[g].room);
    left -= taken[g];
  }
  if (left > 0) taken[0] += left; // more text than the numbers allow (a guess was wrong): say it first
  gaps.forEach((gap, g) => {
    if (gap.at < messages.length) before[gap.at] += taken[g];
  });
  return before;
}

function room(previous, next, reasoning) {
  if (!previous || previous.session !== next.session) return Infinity;
  if (previous.lastKind === "RequestOpened") return 0;
  let free = next.first - previous.last - 1 - 1 - 2 * reasoning; // less the MessageEnded that ends the text
  if (previous.lastKind === "RequestClosed") free -= 1; // the session's StatusChanged back to Working
  return Math.max(0, free);
}

/** A transcript under construction: `entries` (a fresh array after each change, for rendering). */
export class Transcript {
  constructor() {
    this.entries = [];
    this.tools = new Map(); // tool id → index in entries
    this.lastText = -1; // index of the agent text entry response chunks append to, -1 when none is open
    this.seen = new Set(); // event sequences already shown (a task's history and its stream overlap)
    this.open = null; // the request opened last and not closed yet ({id, …}), which a user's answer answers
    this.requests = new Map(); // request id → the RequestOpened value
    this.answers = new Map(); // request id → the Answer given ({"Permission": …} or {"Question": […]})
    this.closed = new Map(); // request id → index of its "answered" entry
  }

  /** The answer `answer` was given to request `id` (read from the history, or sent from this page): its closing
   * entry says what was answered, now or when it comes. */
  answered(id, answer) {
    if (id == null) return;
    this.answers.set(id, answer);
    if (this.closed.has(id)) {
      const index = this.closed.get(id);
      this.replace(index, { ...this.entries[index], text: answerText(this.requests.get(id), answer) });
    }
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

  /** A whole task (GetTask, or a stream's first result): its history and status message in order, the response
   * artifact's text chunks placed among them where they were said (`placeText`), then any other artifact. */
  addTask(task) {
    const messages = [...(task.history || [])];
    const states = messages.map(() => null);
    if (task.status.message) {
      messages.push(task.status.message);
      states.push(task.status.state);
    }
    const response = (task.artifacts || []).filter((a) => a.artifactId === RESPONSE_ARTIFACT);
    const chunks = response.flatMap((a) => (a.parts || []).map((p) => p.text || "").filter((t) => t));
    const before = placeText(messages, chunks.length, TERMINAL.has(task.status.state));
    let next = 0;
    const say = (count) => {
      for (const text of chunks.slice(next, next + count)) {
        this.addArtifact({ artifact: { parts: [{ text }] }, append: next > 0 });
        next += 1;
      }
    };
    messages.forEach((message, i) => {
      say(before[i]);
      this.addMessage(message, states[i]);
    });
    say(chunks.length - next);
    for (const artifact of task.artifacts || []) {
      if (artifact.artifactId !== RESPONSE_ARTIFACT) this.addArtifact({ artifact, append: false });
    }
  }

  /** One message: a user's text, or an agent's events and reasoning (its plain text only when it says what no
   * event says: not a completed turn's summary, not a request's words). */
  addMessage(message, state) {
    if (!message) return;
    if (message.role === "ROLE_USER") {
      const data = (message.parts || []).find((p) => p.data !== undefined);
      const given = data && data.data && (data.data.Permission !== undefined || data.data.Question !== undefined);
      if (given && this.open) {
        this.answered(this.open.id, data.data); // shown where its request closes, as the live view shows it
      } else {
        const text = textOf(message) || (data ? JSON.stringify(data.data) : "");
        if (text) this.push({ kind: "user", text });
      }
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
      this.open = value.Permission || value.Question || null;
      if (this.open) this.requests.set(this.open.id, value);
      this.lastText = -1;
    } else if (name === "ContextUsage") {
      this.push({ kind: "usage", usage: value });
    } else if (name === "TurnEnded") {
      const stop = value && value.stop;
      const how = stop && typeof stop === "object" ? Object.keys(stop)[0] : String(stop || "");
      this.push({ kind: "event", text: `turn ended: ${how}` });
    } else if (name === "RequestClosed") {
      const id = value && value.request_id;
      const request = this.requests.get(id);
      const answer = this.answers.get(id);
      this.closed.set(id, this.push({ kind: "event", answered: id, text: answerText(request, answer) }));
      if (this.open && this.open.id === id) this.open = null;
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
