// The web console: open an agent, read its conversations, sign its holds.
// Server-rendered HTML behind ADMIN_TOKEN; worker.ts mounts it at /console.
import { Hono, type Context, type MiddlewareHandler } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { ConfigError } from "../lib/config.ts";
import { HttpError, isHttpsOrLoopback, readBody, safeEqual } from "../lib/http.ts";
import { adminToken, agentStub, CONVERSATION_ID, parseRoute, readConversation, submitEvent, type Route } from "../runtime/index.ts";
import { sessionValue, SESSION_COOKIE, signedIn } from "./auth.ts";
import { cardHtml } from "./card.ts";
import { html, isoTime, page, type Html } from "./html.ts";

type Ctx = Context<{ Bindings: Env }>;

const BASE = "/console";
const FORM = { contentTypes: ["application/x-www-form-urlencoded"], maxBytes: 8 * 1024 };
const HOLD_ID = /^[A-Za-z0-9_-]{1,64}$/;

export const consoleRoutes = new Hono<{ Bindings: Env }>();

function agentPath(route: Route): string {
  return `${BASE}/tenants/${encodeURIComponent(route.tenant)}/agents/${encodeURIComponent(route.agent)}`;
}

function conversationPath(route: Route, id: string): string {
  return `${agentPath(route)}/conversations/${encodeURIComponent(id)}`;
}

async function readForm(c: Ctx): Promise<URLSearchParams> {
  return new URLSearchParams(await readBody(c, FORM));
}

function loginPage(c: Ctx, message?: string) {
  const body = html`${message ? html`<p class="notice">${message}</p>` : ""}
<form method="post" action="${BASE}/login"><label>Admin token <input type="password" name="token" autocomplete="current-password" autofocus></label>
<button>Sign in</button></form>`;
  return c.html(page("Sign in", body, false).value, message ? 401 : 200);
}

consoleRoutes.get("/login", (c) => {
  adminToken(c.env);
  return loginPage(c);
});

consoleRoutes.post("/login", async (c) => {
  const token = adminToken(c.env);
  const given = (await readForm(c)).get("token") ?? "";
  if (!safeEqual(given, token)) return loginPage(c, "That is not the admin token.");
  // Secure everywhere but plain http on loopback, where `wrangler dev` serves the console.
  const url = new URL(c.req.url);
  const secure = !(url.protocol === "http:" && isHttpsOrLoopback(url));
  setCookie(c, SESSION_COOKIE, await sessionValue(token), { httpOnly: true, secure, sameSite: "Strict", path: BASE });
  return c.redirect(BASE, 303);
});

consoleRoutes.post("/logout", (c) => {
  deleteCookie(c, SESSION_COOKIE, { path: BASE });
  return c.redirect(`${BASE}/login`, 303);
});

/** A page is shown only when signed in: a GET is sent to sign in, anything else is refused. */
const guard: MiddlewareHandler<{ Bindings: Env }> = async (c, next) => {
  if (await signedIn(c, adminToken(c.env))) return next();
  if (c.req.method === "GET") return c.redirect(`${BASE}/login`, 303);
  return c.html(page("Not signed in", html`<p>Sign in first: <a href="${BASE}/login">sign in</a>.</p>`, false).value, 401);
};
consoleRoutes.use("/", guard);
consoleRoutes.use("/tenants/*", guard);

function openAgentForm(route?: Route): Html {
  return html`<form method="get" action="${BASE}">
<label>Tenant <input type="text" name="tenant" value="${route?.tenant ?? ""}" required></label>
<label>Agent <input type="text" name="agent" value="${route?.agent ?? ""}" required></label>
<button>Open agent</button></form>`;
}

// An HTML form cannot fill path segments, so the open-agent form comes back here as a query.
consoleRoutes.get("/", (c) => {
  const tenant = c.req.query("tenant");
  const agent = c.req.query("agent");
  if (tenant !== undefined && agent !== undefined) return c.redirect(agentPath(parseRoute(tenant.trim(), agent.trim())), 303);
  return c.html(page("Open an agent", openAgentForm()).value);
});

consoleRoutes.get("/tenants/:tenant/agents/:agent", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  const conversations = await agentStub(c.env, route).conversations(route, "");
  const list = conversations.length
    ? html`<table><thead><tr><th>Conversation</th><th>Status</th><th>Updated</th></tr></thead><tbody>
${conversations.map((conv) => html`<tr><td><a href="${conversationPath(route, conv.id)}">${conv.id}</a></td><td>${conv.status}</td><td>${isoTime(conv.updatedAt)}</td></tr>`)}
</tbody></table>`
    : html`<p>No conversations yet.</p>`;
  return c.html(page(`${route.agent} · ${route.tenant}`, html`<h3>Conversations (latest 100)</h3>${list}<h3>Open another agent</h3>${openAgentForm(route)}`).value);
});

type ConversationView = NonNullable<Awaited<ReturnType<ReturnType<typeof agentStub>["conversation"]>>>;

function entryHtml(entry: ConversationView["transcript"][number]): Html {
  let who: string;
  let extra: Html | string = "";
  switch (entry.role) {
    case "user":
      who = `${entry.steer ? "steer" : "user"} · ${entry.by}`;
      break;
    case "assistant":
      who = "assistant";
      if (entry.toolCalls.length) extra = html`<p>Calls: ${entry.toolCalls.map((call) => call.name).join(", ")}</p>`;
      break;
    case "tool":
      who = `tool · ${entry.toolName}${entry.isError ? " (error)" : ""}`;
      break;
    case "note":
      who = "note";
      break;
  }
  return html`<div class="entry ${entry.role}"><span class="role">${who}</span> <small>${isoTime(entry.at)}</small>
${entry.text ? html`<pre>${entry.text}</pre>` : ""}${extra}</div>`;
}

consoleRoutes.get("/tenants/:tenant/agents/:agent/conversations/:id", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  const id = c.req.param("id");
  const view = await readConversation(c.env, route, id);
  const notice = c.req.query("notice");
  const body = html`<p><a href="${agentPath(route)}">← ${route.agent} · ${route.tenant}</a></p>
${notice ? html`<p class="notice" role="status">${notice}</p>` : ""}
<p>Status: <strong class="status">${view.status}</strong>${view.error ? html` — ${view.error}` : ""}</p>
<h3>Approvals</h3>${view.holds.length ? view.holds.map((card) => cardHtml(card, { route, conversation: id })) : html`<p>None.</p>`}
<h3>Transcript</h3>${view.transcript.map(entryHtml)}`;
  return c.html(page(`Conversation ${id}`, body).value);
});

consoleRoutes.post("/tenants/:tenant/agents/:agent/holds/:holdId", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  const holdId = c.req.param("holdId");
  if (!HOLD_ID.test(holdId)) throw new HttpError(400, "invalid hold id");
  const form = await readForm(c);
  const approve = form.get("approve");
  const conversation = form.get("conversation") ?? "";
  if (approve !== "1" && approve !== "0") throw new HttpError(400, "approve must be 1 or 0");
  if (!CONVERSATION_ID.test(conversation)) throw new HttpError(400, "invalid conversation id");
  // The object decides whether "console:admin" may sign (APPROVERS), as for any other person.
  const result = await submitEvent(c.env, route, {
    id: `console:${crypto.randomUUID()}`,
    kind: "decision",
    conversation,
    holdId,
    approve: approve === "1",
    boundTo: route,
    user: { platform: "console", id: "admin", name: "console" },
  });
  const notice = result.notice ?? (approve === "1" ? "Approved." : "Denied.");
  return c.redirect(`${conversationPath(route, conversation)}?notice=${encodeURIComponent(notice)}`, 303);
});

consoleRoutes.onError((err, c) => {
  if (err instanceof HttpError) return c.html(page(`Error ${err.status}`, html`<p>${err.message}</p>`, false).value, err.status);
  if (err instanceof ConfigError) {
    console.error(err.message);
    return c.html(page("Configuration error", html`<p>${err.message}</p>`, false).value, 503);
  }
  console.error("console: unhandled error", err);
  return c.html(page("Error", html`<p>Internal error.</p>`, false).value, 500);
});
