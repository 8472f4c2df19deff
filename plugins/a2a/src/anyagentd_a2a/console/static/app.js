// The console's shell: who the daemon takes this page for, the navigation, and hash routing to the pages —
// #/ (overview), #/conversations, #/waiting, #/task/{agent}/{task id}, #/runs, #/run/{run id}, #/subagents.
//
// Signing in: the page first asks as it is (a bearer from sessionStorage, or none). On a loopback daemon without
// credentials the daemon's implicit operator answers a same-origin page without any token; otherwise a 401 shows
// the sign-in page. GET /agents and the caller's card (the root's) are asked at once, and the shown page's first
// load (overview, conversations, waiting) starts with them, not after (api.js `prefetch`; GET /agents asked once
// for both).

import { forgetPrefetched, listAgents, prefetch, token, whoami } from "./api.js";
import { html, render, useEffect, useState } from "./html.js";
import { AdminLink, AdminPage } from "./pages/admin.js";
import { Conversation } from "./pages/conversation.js";
import { ConversationsPage, load as conversationsLoad } from "./pages/conversations.js";
import { Overview, load as overviewLoad } from "./pages/overview.js";
import { RunPage, RunsPage } from "./pages/runs.js";
import { SignIn } from "./pages/signin.js";
import { SubagentsPage } from "./pages/subagents.js";
import { WaitingPage, load as waitingLoad } from "./pages/waiting.js";

/** The pages whose first load may start with the session's check. */
const AHEAD = { overview: overviewLoad, conversations: conversationsLoad, waiting: waitingLoad };

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "waiting") return { page: "waiting" };
  if (parts[0] === "conversations") return { page: "conversations" };
  if (parts[0] === "runs") return { page: "runs" };
  if (parts[0] === "run" && parts[1]) return { page: "runs", runId: parts[1] };
  if (parts[0] === "subagents") return { page: "subagents" };
  if (parts[0] === "admin") return { page: "admin" };
  if (parts[0] === "task" && parts[1] && parts[2]) return { page: "task", agent: parts[1], taskId: parts[2] };
  return { page: "overview" };
}

function useRoute() {
  const [current, setCurrent] = useState(route());
  useEffect(() => {
    const changed = () => setCurrent(route());
    addEventListener("hashchange", changed);
    return () => removeEventListener("hashchange", changed);
  }, []);
  return current;
}

function Header({ principal, current, onSignOut }) {
  const link = (href, page, label) =>
    html`<a href=${href} class=${current.page === page ? "current" : ""} id=${`nav-${page}`}>${label}</a>`;
  return html`<header class="top">
    <h1>anyagentd</h1>
    <nav>${link("#/", "overview", "Overview")} ${link("#/conversations", "conversations", "Conversations")} ${link("#/waiting", "waiting", "Waiting for a person")} ${link("#/runs", "runs", "Workflow runs")} ${link("#/subagents", "subagents", "Subagents")} <${AdminLink} current=${current} /></nav>
    <span class="who" id="principal">${principal}</span>
    ${token.get() && html`<button id="sign-out" onClick=${onSignOut}>Sign out</button>`}
  </header>`;
}

function App() {
  const [session, setSession] = useState({ phase: "checking", principal: null, reason: null });
  const current = useRoute();
  const check = async () => {
    setSession({ phase: "checking", principal: null, reason: null });
    const listed = listAgents();
    const page = route().page;
    if (AHEAD[page]) prefetch(page, AHEAD[page]);
    try {
      const [, principal] = await Promise.all([listed, whoami()]);
      setSession({ phase: "ready", principal: principal || "signed in", reason: null });
    } catch (err) {
      forgetPrefetched();
      if (err.status === 401) {
        const refused = token.get() !== null;
        token.clear();
        setSession({ phase: "signin", principal: null, reason: refused ? "That token was refused." : null });
      } else {
        setSession({ phase: "error", principal: null, reason: err.message });
      }
    }
  };
  useEffect(() => {
    check();
  }, []);
  const signOut = () => {
    token.clear();
    check();
  };
  if (session.phase === "checking") return html`<p class="loading">Connecting to the daemon…</p>`;
  if (session.phase === "signin") return html`<${SignIn} reason=${session.reason} onSignedIn=${check} />`;
  if (session.phase === "error") return html`<main><p class="error">${session.reason}</p></main>`;
  let page;
  if (current.page === "waiting") page = html`<${WaitingPage} />`;
  else if (current.page === "conversations") page = html`<${ConversationsPage} />`;
  else if (current.page === "admin") page = html`<${AdminPage} principal=${session.principal} />`;
  else if (current.page === "runs" && current.runId) page = html`<${RunPage} key=${current.runId} runId=${current.runId} />`;
  else if (current.page === "runs") page = html`<${RunsPage} />`;
  else if (current.page === "subagents") page = html`<${SubagentsPage} />`;
  else if (current.page === "task")
    page = html`<${Conversation} key=${current.agent + "/" + current.taskId} ...${current} />`;
  else page = html`<${Overview} />`;
  return html`<${Header} principal=${session.principal} current=${current} onSignOut=${signOut} />${page}`;
}

render(html`<${App} />`, document.getElementById("app"));
