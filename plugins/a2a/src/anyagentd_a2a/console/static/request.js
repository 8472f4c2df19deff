// An open request as the agent put it — a permission (the tool, its input, diffs and locations, the offered
// options) or questions (their choices, free text) — with the controls that answer it: each answer is the wire's
// Answer JSON sent as a SendMessage naming the task (api.answer), the path every A2A client answers by.

import { answer } from "./api.js";
import { html, useState } from "./html.js";
import { optionLabel } from "./wire.js";

function Diffs({ diffs }) {
  return (diffs || []).map(
    (d) => html`<div class="diff">
      <div class="muted">${d.old_text == null ? "new file" : "change"} <code>${d.path}</code></div>
      <pre>${d.new_text}</pre>
    </div>`,
  );
}

function Permission({ request, send, busy }) {
  const tool = request.tool || {};
  return html`<div>
    <h3 class="request-title">${tool.title || "Permission"}</h3>
    ${request.detail && html`<p>${request.detail}</p>`}
    ${tool.kind && html`<div class="muted">tool kind: ${tool.kind}</div>`}
    ${tool.input && html`<pre class="input">${JSON.stringify(tool.input, null, 1)}</pre>`}
    <${Diffs} diffs=${tool.diffs} />
    <div class="actions">
      ${(request.options || []).map(
        (option) => html`<button
          class=${option.startsWith("Allow") ? "allow" : "deny"}
          data-option=${option}
          disabled=${busy}
          onClick=${() => send({ Permission: option })}
        >
          ${optionLabel(option)}
        </button>`,
      )}
    </div>
  </div>`;
}

function Questions({ request, send, busy }) {
  const questions = request.questions || [];
  const [chosen, setChosen] = useState(questions.map(() => null));
  const [texts, setTexts] = useState(questions.map(() => ""));
  const set = (list, setter, index, value) => setter(list.map((v, i) => (i === index ? value : v)));
  const answers = questions.map((q, i) =>
    texts[i].trim() ? { Text: texts[i].trim() } : chosen[i] ? { Choices: [chosen[i]] } : null,
  );
  const ready = answers.every((a) => a !== null);
  return html`<div>
    ${questions.map(
      (q, i) => html`<div class="question">
        <h3>${q.header ? `${q.header}: ` : ""}${q.text}</h3>
        <div class="actions">
          ${(q.choices || []).map(
            (c) => html`<button
              class=${chosen[i] === c.id ? "primary" : ""}
              data-choice=${c.id}
              disabled=${busy}
              onClick=${() => set(chosen, setChosen, i, c.id)}
              title=${c.description || ""}
            >
              ${c.label}
            </button>`,
          )}
          ${q.allows_free_text &&
          html`<input
            type="text"
            class="free-text"
            placeholder="or answer in your own words"
            value=${texts[i]}
            onInput=${(e) => set(texts, setTexts, i, e.target.value)}
          />`}
        </div>
      </div>`,
    )}
    <div class="actions">
      <button class="primary send-answer" disabled=${busy || !ready} onClick=${() => send({ Question: answers })}>
        Send answer
      </button>
    </div>
  </div>`;
}

/** The request `request` of task `task` on agent `agent`, answerable; `onAnswered` runs after the daemon took it. */
export function RequestView({ agent, task, request, onAnswered }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [sent, setSent] = useState(null);
  const send = async (value) => {
    setBusy(true);
    setError(null);
    try {
      await answer(agent, task, value);
      setSent(value);
      if (onAnswered) onAnswered(value);
    } catch (err) {
      setError(err.message);
      setBusy(false);
    }
  };
  const body = request.Permission
    ? html`<${Permission} request=${request.Permission} send=${send} busy=${busy || sent} />`
    : html`<${Questions} request=${request.Question || {}} send=${send} busy=${busy || sent} />`;
  return html`<div class="request-view">
    ${body} ${sent && html`<p class="muted answered">Answered: <code>${JSON.stringify(sent)}</code></p>`}
    ${error && html`<p class="error">${error}</p>`}
  </div>`;
}
