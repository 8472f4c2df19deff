// One conversation live: the task's transcript from SubscribeToTask — its history first (the stream's first
// result is the task), then each status and artifact update as it comes — with the request it waits on answerable
// in place. A task already ended cannot be subscribed to: its GetTask is shown instead.

import { rpc, subscribe } from "../api.js";
import { html, useEffect, useRef, useState } from "../html.js";
import { RequestView } from "../request.js";
import { TERMINAL, Transcript, waitingRequest } from "../wire.js";
import { short } from "./overview.js";

function Entry({ entry }) {
  switch (entry.kind) {
    case "user":
      return html`<div class="entry user"><span class="muted">you:</span> ${entry.text}</div>`;
    case "text":
      return html`<div class="entry text">${entry.text}</div>`;
    case "reasoning":
      return html`<div class="entry reasoning">${entry.text}</div>`;
    case "note":
      return html`<div class="entry note">${entry.text}</div>`;
    case "tool": {
      const tool = entry.tool;
      return html`<div class="entry tool" data-tool=${tool.id} data-status=${tool.status}>
        <span class="title">${tool.title}</span> <span class=${`badge ${tool.status}`}>${tool.status}</span>
        ${tool.output && html`<pre class="output">${typeof tool.output === "string" ? tool.output : JSON.stringify(tool.output, null, 1)}</pre>`}
      </div>`;
    }
    case "plan":
      return html`<div class="entry plan">
        <span class="muted">plan</span>
        <ul>${entry.entries.map((e) => html`<li><span class=${`badge ${e.status}`}>${e.status}</span> ${e.text}</li>`)}</ul>
      </div>`;
    case "request": {
      const opened = entry.request.Permission || entry.request.Question || {};
      const what = entry.request.Permission
        ? `permission asked: ${(opened.tool && opened.tool.title) || ""}`
        : `question asked: ${(opened.questions || []).map((q) => q.text).join(" ")}`;
      return html`<div class="entry event request-opened">${what}</div>`;
    }
    case "usage": {
      const u = entry.usage;
      const cost = u.cost_usd != null ? ` · $${u.cost_usd}` : "";
      return html`<div class="entry usage">context ${u.used_tokens} of ${u.window_tokens} tokens${cost}</div>`;
    }
    default:
      if (entry.answered !== undefined) {
        return html`<div class="entry event answer" data-request=${entry.answered}>${entry.text}</div>`;
      }
      return html`<div class="entry event">${entry.text}</div>`;
  }
}

export function Conversation({ agent, taskId }) {
  const [view, setView] = useState({ entries: [], task: null, live: false, error: null });
  const current = useRef(null); // the transcript shown, for an answer sent from this page
  useEffect(() => {
    const abort = new AbortController();
    const transcript = new Transcript();
    current.current = transcript;
    let task = null;
    const show = (live) => setView({ entries: transcript.entries, task, live, error: null });
    const onResult = (result) => {
      if (result.task) {
        task = result.task;
        transcript.addTask(task);
      } else if (result.statusUpdate) {
        const update = result.statusUpdate;
        task = { ...task, status: update.status };
        transcript.addMessage(update.status.message, update.status.state);
      } else if (result.artifactUpdate) {
        transcript.addArtifact(result.artifactUpdate);
      }
      show(true);
    };
    (async () => {
      while (!abort.signal.aborted) {
        try {
          await subscribe(agent, taskId, onResult, abort.signal);
        } catch (err) {
          if (abort.signal.aborted) return;
          // an ended task cannot be subscribed to: show what GetTask says of it
          try {
            const got = await rpc(agent, "GetTask", { id: taskId });
            if (!task) transcript.addTask(got);
            else transcript.addMessage(got.status.message, got.status.state);
            task = got;
            show(false);
          } catch (failed) {
            setView((v) => ({ ...v, error: failed.message }));
            return;
          }
          if (TERMINAL.has(task.status.state)) return;
        }
        if (!task || TERMINAL.has(task.status.state)) {
          show(false);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 1000)); // the stream ended early: subscribe again
      }
    })();
    return () => abort.abort();
  }, [agent, taskId]);
  const { entries, task, live, error } = view;
  const request = task && waitingRequest(task);
  const opened = request && (request.Permission || request.Question);
  return html`<main>
    <h2>Conversation <code>${taskId.slice(0, 8)}</code> on ${agent}</h2>
    ${task &&
    html`<p>
      <span class=${`badge ${task.status.state} task-state`} data-state=${task.status.state}>${short(task.status.state)}</span>
      <span class="muted"> context <code>${task.contextId}</code>${live ? " · live" : ""}</span>
    </p>`}
    ${error && html`<p class="error">${error}</p>`}
    <div class="transcript">${entries.map((entry) => html`<${Entry} entry=${entry} />`)}</div>
    ${request &&
    html`<div class="panel request">
      <${RequestView}
        key=${`${task.id}:${opened.id}`}
        agent=${agent}
        task=${task}
        request=${request}
        onAnswered=${(value) => {
          const transcript = current.current;
          if (!transcript) return;
          transcript.answered(opened.id, value); // the stream says the request closed, never what was answered
          setView((v) => ({ ...v, entries: transcript.entries }));
        }}
      />
    </div>`}
  </main>`;
}
