// The daemon's push stream of task changes, GET /console/events (console/events.py): read with fetch() streaming,
// the bearer in the Authorization header (never in a URL: no EventSource, which cannot send one). Frames:
// {type: "hello"} on connect, {type: "task", agent, id, contextId, state, timestamp, message?} per change the
// principal may see, {type: "resync"} when this page fell behind and must list again.
//
// `useLive(load, apply, key)` keeps a page's value live: `load()` (ListTasks and the like) at once when the page is
// shown (the load app.js started ahead under `key`, if any: api.js `prefetch`), then again on every hello and
// resync — the stream's changes are complete only from its hello on, so the first load is shown as soon as it is in
// and the hello's load makes it exact — then `apply(value, frame)` for each task change — a new value, or null to
// load again. Frames that arrive while a load is under way are applied on top of its result, in order, once it is
// in. The stream reconnects after an error (the next hello resyncs), and stops on 401 (signed out or the session
// revoked: api.js `refusedBearer` takes the page back to the sign-in page).

import { RpcError, claim, refusedBearer, sseData, token } from "./api.js";
import { useEffect, useState } from "./html.js";

const EVENTS = new URL("events", document.baseURI).href;
const RETRY_MS = [500, 1000, 2000, 5000];

/** Read the stream until it ends or `signal` aborts it; `onFrame` gets each frame's JSON. Throws RpcError when the
 * daemon refuses (401 without a valid credential). */
export async function readEvents(onFrame, signal) {
  const headers = { Accept: "text/event-stream" };
  const bearer = token.get();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const response = await fetch(EVENTS, { headers, credentials: "omit", cache: "no-store", signal });
  if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
    let body = null;
    try {
      body = await response.json();
    } catch {}
    const error = body && body.error;
    const refused = new RpcError(error ? error.message : `GET /console/events: HTTP ${response.status}`, {
      status: response.status,
      code: error ? error.code : null,
    });
    refused.refusedBearer = refusedBearer(response.status, bearer); // the shell signs out
    throw refused;
  }
  for await (const frame of sseData(response)) onFrame(frame);
}

/** When a frame or a listed task says its status was set (ms since the epoch; 0 when it does not say). */
export function stamp(timestamp) {
  const ms = timestamp ? Date.parse(timestamp) : NaN;
  return Number.isNaN(ms) ? 0 : ms;
}

/** {value, error, loaded, live}: see the module comment. */
export function useLive(load, apply, key = null) {
  const [state, setState] = useState({ value: null, error: null, loaded: false, live: false });
  useEffect(() => {
    const abort = new AbortController();
    let value = null;
    let loading = false;
    let again = false;
    let pending = [];
    const show = (change) => {
      if (!abort.signal.aborted) setState((s) => ({ ...s, ...change }));
    };
    let first = true;
    const resync = async () => {
      if (loading) {
        again = true;
        return;
      }
      loading = true;
      pending = [];
      const ahead = first && key !== null ? claim(key) : null;
      first = false;
      try {
        let fresh = await (ahead || load());
        for (const frame of pending) {
          const next = apply(fresh, frame);
          if (next === null) again = true; // the change may be newer than the listing: list again
          else fresh = next;
        }
        value = fresh;
        show({ value, error: null, loaded: true });
      } catch (err) {
        show({ error: err, loaded: true });
      }
      loading = false;
      pending = [];
      if (again) {
        again = false;
        resync();
      }
    };
    const onFrame = (frame) => {
      if (frame.type === "hello" || frame.type === "resync") {
        if (frame.type === "hello") show({ live: true });
        resync();
      } else if (frame.type === "task") {
        if (loading) {
          pending.push(frame);
          return;
        }
        const next = apply(value, frame);
        if (next === null) {
          resync();
        } else {
          value = next;
          show({ value });
        }
      }
    };
    resync(); // at once, while the stream connects: its hello loads again
    (async () => {
      let attempt = 0;
      while (!abort.signal.aborted) {
        try {
          await readEvents(onFrame, abort.signal);
          attempt = 0;
        } catch (err) {
          if (abort.signal.aborted) return;
          show({ live: false, error: err, loaded: true });
          if (err instanceof RpcError && (err.status === 401 || err.status === 403)) return;
        }
        show({ live: false });
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS[Math.min(attempt++, RETRY_MS.length - 1)]));
      }
    })();
    return () => abort.abort();
  }, []);
  return state;
}
