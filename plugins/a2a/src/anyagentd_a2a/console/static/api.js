// The console's only way to the daemon: its own same-origin A2A endpoints, as any A2A client uses them.
//
// - GET /agents: the served agents;
// - POST /agents/{id}/: JSON-RPC (ListTasks, GetTask, SendMessage, GetExtendedAgentCard), and SubscribeToTask, whose
//   answer is a server-sent-events stream read with fetch() streaming;
// - command ops: a SendMessage whose message carries a DataPart {"agentd": {"op": …}}, marked with the command
//   extension's URI (the message's `extensions` and the A2A-Extensions header).
//
// The bearer the person pasted lives in sessionStorage (gone with the tab) and travels only in the Authorization
// header, never in a URL. Paths are relative to the page (/console/ → ../agents), so a daemon served under a path
// prefix works too.
//
// A 401 to a request that carried the stored bearer (revoked, expired, or never valid) clears it and tells the
// shell (`onRefused`): the page goes back to the sign-in page saying the token was refused, whatever asked.

export const COMMAND_URI = "https://agentd.dev/a2a/ext/command";
const TOKEN_KEY = "anyagentd.console.token";
const ROOT = new URL("../", document.baseURI);

/** An answer the daemon refused: `status` (HTTP), `code` and `message` (JSON-RPC), `reason` (ErrorInfo). */
export class RpcError extends Error {
  constructor(message, { status = 0, code = null, reason = null } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.reason = reason;
  }
  get unauthenticated() {
    return this.status === 401;
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

let onRefusedListener = null;

/** Call `listener()` whenever the daemon refuses the stored bearer (after it is cleared); the shell's. */
export function onRefused(listener) {
  onRefusedListener = listener;
}

/** After an answer of HTTP `status` to a request sent with bearer `sent` (null: none): true when the daemon
 * refused that bearer (401) — then it is cleared (unless another was stored since) and the shell told. */
export function refusedBearer(status, sent) {
  if (status !== 401 || !sent) return false;
  if (token.get() === sent) {
    token.clear();
    if (onRefusedListener) onRefusedListener();
  }
  return true;
}

function headers(extra = {}) {
  const sent = { "Content-Type": "application/json", "A2A-Version": "1.0", ...extra };
  const bearer = token.get();
  if (bearer) sent.Authorization = `Bearer ${bearer}`;
  return sent;
}

/** The JSON-RPC endpoint URL of agent `id`. */
export function agentEndpoint(id) {
  return new URL(`agents/${encodeURIComponent(id)}/`, ROOT).href;
}

let nextId = 1;

function errorOf(status, body) {
  const error = body && body.error;
  if (!error) return new RpcError(`HTTP ${status}`, { status });
  const info = (error.data || []).find((d) => String(d["@type"] || "").endsWith("ErrorInfo"));
  return new RpcError(error.message, { status, code: error.code, reason: info ? info.reason : null });
}

async function post(agent, method, params, extra = {}) {
  return fetch(agent === null ? ROOT.href : agentEndpoint(agent), {
    method: "POST",
    headers: headers(extra),
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method, params }),
    credentials: "omit",
    cache: "no-store",
  });
}

/** The `result` of JSON-RPC `method` on agent `agent` (null: the root, the default agent's); throws RpcError. */
export async function rpc(agent, method, params = {}, extra = {}) {
  const sent = token.get();
  const response = await post(agent, method, params, extra);
  let body = null;
  try {
    body = await response.json();
  } catch {}
  if (!response.ok || !body || body.error) {
    const error = body
      ? errorOf(response.status, body)
      : new RpcError(`HTTP ${response.status}`, { status: response.status });
    error.refusedBearer = refusedBearer(response.status, sent);
    throw error;
  }
  return body.result;
}

let listing = null;

/** GET /agents: {default, agents: [{id, name, description, default, state, url, card}]}. Calls made while one is
 * under way share its answer (the shell and the first page ask at once); a call after it ended asks again. */
export function listAgents() {
  if (listing) return listing;
  listing = (async () => {
    const response = await fetch(new URL("agents", ROOT).href, { credentials: "omit", cache: "no-store" });
    if (!response.ok) throw new RpcError(`GET /agents: HTTP ${response.status}`, { status: response.status });
    return response.json();
  })();
  const asked = listing;
  asked.then(
    () => listing === asked && (listing = null),
    () => listing === asked && (listing = null),
  );
  return asked;
}

const early = new Map();
const EARLY_MS = 5000;

/** Start a page's first load (`start()`) now, alongside the shell's own requests, for the page to `claim(key)`
 * when it is shown: the page's figures are asked for at once instead of after the shell is in. */
export function prefetch(key, start) {
  const started = start();
  started.catch(() => {}); // the page sees the error when it claims it
  early.set(key, { started, at: performance.now() });
}

/** The load `prefetch(key, …)` started, once (null when none, already claimed, or started over EARLY_MS ago: the
 * page was not shown then, and loads afresh). */
export function claim(key) {
  const ahead = early.get(key);
  early.delete(key);
  return ahead && performance.now() - ahead.at < EARLY_MS ? ahead.started : null;
}

/** Forget every load started ahead (the shell did not get in: signed out, refused). */
export function forgetPrefetched() {
  early.clear();
}

/** Who the daemon takes this page for: {principal, role} as the extended card names them (null when it names
 * none); the root's card (the default agent's, asked without waiting for GET /agents) unless `agent` is given. */
export async function whoami(agent = null) {
  const card = await rpc(agent, "GetExtendedAgentCard", {});
  const extensions = (card.capabilities && card.capabilities.extensions) || [];
  const command = extensions.find((e) => e.uri === COMMAND_URI);
  const params = (command && command.params) || {};
  return { principal: params.principal || null, role: params.role || null };
}

function message(parts, extra = {}) {
  return { messageId: crypto.randomUUID(), role: "ROLE_USER", parts, ...extra };
}

/** The result document of command op `op` (with `args`) on agent `agent`: a message op's DataPart, or a task op's
 * result artifact. */
export async function command(agent, op, args = {}) {
  const sent = message([{ data: { agentd: { op, ...args } }, mediaType: "application/json" }], {
    extensions: [COMMAND_URI],
  });
  const result = await rpc(agent, "SendMessage", { message: sent }, { "A2A-Extensions": COMMAND_URI });
  if (result.message) return result.message.parts[0].data;
  const artifact = (result.task.artifacts || [])[0];
  return artifact ? artifact.parts[0].data : null;
}

/** Answer the request task `taskId` waits on with the wire's Answer JSON (`{"Permission": "AllowOnce"}`,
 * `{"Question": [...]}`): a SendMessage naming the task, as any A2A client answers. Returns immediately (the
 * agent goes on at once; the stream or the next poll shows the rest). */
export async function answer(agent, task, value) {
  const sent = message([{ data: value, mediaType: "application/json" }], {
    taskId: task.id,
    contextId: task.contextId,
  });
  return rpc(agent, "SendMessage", { message: sent, configuration: { returnImmediately: true } });
}

/** Every task of agent `agent` in `state` (or any), newest first, without history. */
export async function listTasks(agent, { state = null, pageSize = 50 } = {}) {
  const params = { pageSize, historyLength: 0 };
  if (state) params.status = state;
  return rpc(agent, "ListTasks", params);
}

/** SubscribeToTask on `taskId`: calls `onResult` with each streamed result ({task} first, then {statusUpdate} and
 * {artifactUpdate}) until the stream ends or `signal` aborts it. Throws RpcError when the daemon refuses. */
export async function subscribe(agent, taskId, onResult, signal) {
  const sent = token.get();
  const response = await fetch(agentEndpoint(agent), {
    method: "POST",
    headers: headers({ Accept: "text/event-stream" }),
    body: JSON.stringify({ jsonrpc: "2.0", id: nextId++, method: "SubscribeToTask", params: { id: taskId } }),
    credentials: "omit",
    cache: "no-store",
    signal,
  });
  const type = response.headers.get("content-type") || "";
  if (!type.startsWith("text/event-stream")) {
    let body = null;
    try {
      body = await response.json();
    } catch {}
    const error = errorOf(response.status, body);
    error.refusedBearer = refusedBearer(response.status, sent);
    throw error;
  }
  for await (const body of sseData(response)) {
    if (body.error) throw errorOf(200, body);
    onResult(body.result);
  }
}

/** Each server-sent event's `data` of `response`'s body, parsed as JSON, as it arrives (events with no data are
 * skipped; the lines of one event's data are joined by newlines, as the SSE standard says). */
export async function* sseData(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffered = (buffered + value).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const frame = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = frame
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}
