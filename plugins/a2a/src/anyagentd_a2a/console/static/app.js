// The console's shell: who the daemon takes this page for, the navigation, and hash routing to the pages —
// #/ (overview), #/conversations, #/waiting, #/task/{agent}/{task id}, #/runs, #/run/{run id}, #/subagents.
//
// Signing in: the page first asks as it is (a bearer from sessionStorage, or none). On a loopback daemon without
// credentials the daemon's implicit operator answers a same-origin page without any token; otherwise a 401 shows
// the sign-in page. A bearer the daemon refuses later (a session revoked, say: a 401 to any request that carried
// it) is cleared and the sign-in page shown again, saying so (api.js `onRefused`), as on a first load with a bad
// one. The caller's role (the card's) decides the Admin link and page: the operator's alone. GET /agents and the
// caller's card (the root's) are asked at once, and the shown page's first
// load (overview, conversations, waiting) starts with them, not after (api.js `prefetch`; GET /agents asked once
// for both).

import { forgetPrefetched, listAgents, onRefused, prefetch, token, whoami } from "./api.js";
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
const REFUSED = "That token was refused.";

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

function Header({ principal, role, current, onSignOut }) {
  const link = (href, page, label) =>
    html`<a href=${href} class=${current.page === page ? "current" : ""} id=${`nav-${page}`}>${label}</a>`;
  return html`<header class="top">
    <h1>anyagentd</h1>
    <nav>${link("#/", "overview", "Overview")} ${link("#/conversations", "conversations", "Conversations")} ${link("#/waiting", "waiting", "Waiting for a person")} ${link("#/runs", "runs", "Workflow runs")} ${link("#/subagents", "subagents", "Subagents")} <${AdminLink} role=${role} current=${current} /></nav>
    <span class="who" id="principal">${principal}</span>
    ${token.get() && html`<button id="sign-out" onClick=${onSignOut}>Sign out</button>`}
  </header>`;
}

function App() {
  const [session, setSession] = useState({ phase: "checking", principal: null, role: null, reason: null });
  const current = useRoute();
  const check = async () => {
    setSession({ phase: "checking", principal: null, role: null, reason: null });
    const listed = listAgents();
    const page = route().page;
    if (AHEAD[page]) prefetch(page, AHEAD[page]);
    try {
      const [, who] = await Promise.all([listed, whoami()]);
      setSession({ phase: "ready", principal: who.principal || "signed in", role: who.role, reason: null });
    } catch (err) {
      forgetPrefetched();
      if (err.status === 401) {
        const refused = Boolean(err.refusedBearer) || token.get() !== null;
        token.clear();
        setSession({ phase: "signin", principal: null, role: null, reason: refused ? REFUSED : null });
      } else {
        setSession({ phase: "error", principal: null, role: null, reason: err.message });
      }
    }
  };
  useEffect(() => {
    // the stored bearer refused by any request (api.js has cleared it): back to the sign-in page
    onRefused(() => {
      forgetPrefetched();
      setSession({ phase: "signin", principal: null, role: null, reason: REFUSED });
    });
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
  else if (current.page === "admin") page = html`<${AdminPage} principal=${session.principal} role=${session.role} />`;
  else if (current.page === "runs" && current.runId) page = html`<${RunPage} key=${current.runId} runId=${current.runId} />`;
  else if (current.page === "runs") page = html`<${RunsPage} />`;
  else if (current.page === "subagents") page = html`<${SubagentsPage} />`;
  else if (current.page === "task")
    page = html`<${Conversation} key=${current.agent + "/" + current.taskId} ...${current} />`;
  else page = html`<${Overview} />`;
  return html`<${Header} principal=${session.principal} role=${session.role} current=${current} onSignOut=${signOut} />${page}`;
}

render(html`<${App} />`, document.getElementById("app"));
