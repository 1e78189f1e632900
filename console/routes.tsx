// The web console's routes: navigate tenants, agents and conversations, watch
// a turn live, and act on it (send, stop, compact, approve, deny) as
// console:admin. Server-rendered with hono/jsx behind an ADMIN_TOKEN session.
//
// Every form is a POST checked by hono/csrf (Origin / Sec-Fetch-Site) and by
// its own token; each action goes to the agent as a ChatEvent and redirects
// back with the server's answer in a signed cookie, never in the URL. A
// message form may carry files, read as the Agents API reads its attachments
// (console/form.ts).
import { Hono, type MiddlewareHandler } from "hono";
import type { Child } from "hono/jsx";
import { csrf } from "hono/csrf";
import { HTTPException } from "hono/http-exception";
import { NONCE, secureHeaders } from "hono/secure-headers";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import * as z from "zod";
import { ConfigError } from "../lib/config.ts";
import { HttpError, safeEqual } from "../lib/http.ts";
import { migrationFailure } from "../lib/migrations.ts";
import {
  adminToken,
  agentStub,
  changeSetting,
  checkBounds,
  clientOf,
  credentialFailed,
  credentialHeld,
  deleteSecret,
  listTenantSecrets,
  refuseWhileThrottled,
  secretBody,
  secretNameSchema,
  setSecret,
  tenantRoles,
  tenantKeys,
  createTenantKey,
  CHILD_ID,
  CONVERSATION_ID,
  FILE_NAME_MAX_CHARS,
  FILES_MAX_COUNT,
  identitySchema,
  listAgents,
  listTenants,
  newKeyBody,
  parseRoute,
  readAudit,
  readConversation,
  readUsage,
  recordChange,
  revokeTenantKey,
  secondMessageOf,
  SECOND_MESSAGE_STRATEGIES,
  setTenantBounds,
  setTenantLimit,
  setTenantRole,
  submitEvent,
  tenantBounds,
  tenantBoundsSchema,
  tenantRoleSchema,
  type ChatEvent,
  type PageCursor,
  type PendingApproval,
  type Route,
  type SubmitResult,
} from "../runtime/index.ts";
import { Page, stateWords, type PageFrame } from "./layout.tsx";
import { AgentBody, AgentLive, ConversationBody, ConversationLive, HomeBody, TenantBody, type AgentListState, type Tokens } from "./pages.tsx";
import { CHART_DAYS, UsageSection } from "./usage.tsx";
import { AuditSection } from "./audit.tsx";
import { BoundsSection, LimitSection } from "./limits.tsx";
import { accessActions, KeysSection, NewKeyBody, PeopleSection, SecretsSection } from "./access.tsx";
import { discordSignIn, slackSignIn } from "./config.ts";
import { DISCORD_PICK, finishDiscordSignIn, keepChoices, pickedPerson, startDiscordSignIn } from "./discord-sign-in.ts";
import { actionPath, agentPath, boundsPath, conversationPath, holdPath, limitPath, secondMessagePath, tenantPath, type ConversationAction } from "./paths.ts";
import { INHERIT, SecondMessageSection } from "./second-message.tsx";
import { withNames } from "./names.tsx";
import { attachmentsOf, readForm, readSignInForm } from "./form.ts";
import { actingUser, actorName, finishSlackSignIn, roleIn, signInPerson, startSlackSignIn, viewerOf } from "./people.ts";
import { BASE, bearerHolds, closeSession, formToken, formTokenValid, openSession, setResult, takeResult, whoIsAsking, type ConsoleEnv, type Ctx } from "./session.ts";

const PAGE_SIZE = 25;
const DAY_MS = 86_400_000;
/** The home page asks at most this many agents for their pending approvals, in parallel. */
const APPROVALS_FANOUT = 200;
/** Sent by the page's script with the mark its live region was drawn at. */
const LIVE_HEADER = "x-console-live";
const HOLD_ID = /^[A-Za-z0-9_-]{1,64}$/;
/** Who the console acts as: the signed-in person, or for ADMIN_TOKEN "console:admin" (as approvers list it). */
const userOf = (c: Ctx) => actingUser(viewer(c));
const viewer = (c: Ctx) => c.get("viewer") ?? { kind: "platform" as const };

export const consoleRoutes = new Hono<ConsoleEnv>();

consoleRoutes.use(
  "*",
  secureHeaders({
    // Same-origin referrers keep the Origin header on form posts, which hono/csrf checks.
    referrerPolicy: "same-origin",
    contentSecurityPolicy: {
      defaultSrc: ["'none'"],
      scriptSrc: [NONCE],
      styleSrc: [NONCE],
      connectSrc: ["'self'"],
      imgSrc: ["'self'"],
      formAction: ["'self'"],
      frameAncestors: ["'none'"],
      baseUri: ["'none'"],
    },
  }),
);
consoleRoutes.use("*", async (c, next) => {
  await next();
  c.header("cache-control", "no-store");
});
// A browser cannot add an Authorization header to a cross-site form, so a bearer caller (a script) skips the Origin check.
// Only a valid one: any other Authorization header is checked like a browser's form.
const sameOrigin = csrf();
consoleRoutes.use("*", async (c, next) => ((await bearerHolds(c)) ? next() : sameOrigin(c, next)));

// ---- rendering -----------------------------------------------------------------

export async function show(c: Ctx, frame: Omit<PageFrame, "nonce" | "signOutToken" | "result">, status: ContentfulStatusCode = 200) {
  const who = c.get("who");
  const page = (
    <Page
      {...frame}
      nonce={c.get("secureHeadersNonce") ?? ""}
      signOutToken={who ? await formToken(c, `${BASE}/logout`) : undefined}
      result={who ? await takeResult(c) : undefined}
    />
  );
  return c.html(await withNames(c.env, `<!doctype html>${String(page)}`), status);
}

/** What a live region's poll asks, if this request is one: unchanged (answer 204, read nothing more) or changed (draw the region). */
function livePoll(c: Ctx, mark: string): "unchanged" | "changed" | undefined {
  const polled = c.req.header(LIVE_HEADER);
  if (polled === undefined) return undefined;
  return polled === mark ? "unchanged" : "changed";
}

async function liveRegion(c: Ctx, mark: string, region: Child) {
  return c.html(await withNames(c.env, String(region)), 200, { "x-console-mark": mark });
}

async function tokensFor(c: Ctx, actions: string[]): Promise<Tokens> {
  return new Map(await Promise.all(actions.map(async (action) => [action, await formToken(c, action)] as const)));
}

// ---- sign in and out -----------------------------------------------------------

function loginPage(c: Ctx, message?: string) {
  return show(
    c,
    {
      title: "Sign in",
      children: (
        <>
          {message ? <p class="result" role="alert">{message}</p> : null}
          {slackSignIn(c.env) ? (
            <p>
              <a class="sign-in-slack" href={`${BASE}/login/slack`}>Sign in with Slack</a>
            </p>
          ) : null}
          {discordSignIn(c.env) ? (
            <p>
              <a class="sign-in-discord" href={`${BASE}/login/discord`}>Sign in with Discord</a>
            </p>
          ) : null}
          <form method="post" action={`${BASE}/login`}>
            <label>Admin token <input type="password" name="token" autocomplete="current-password" autofocus /></label>
            <button>Sign in</button>
          </form>
        </>
      ),
    },
    message ? 401 : 200,
  );
}

consoleRoutes.get("/login", (c) => {
  adminToken(c.env);
  return loginPage(c);
});

consoleRoutes.post("/login", async (c) => {
  const token = adminToken(c.env);
  const given = (await readSignInForm(c)).get("token") ?? "";
  const client = clientOf(c.req.raw);
  refuseWhileThrottled(client);
  if (!safeEqual(given, token)) {
    credentialFailed(client);
    return loginPage(c, "That is not the admin token.");
  }
  credentialHeld(client);
  await openSession(c);
  return c.redirect(BASE, 303);
});

consoleRoutes.get("/login/slack", (c) => startSlackSignIn(c));

consoleRoutes.get("/login/slack/callback", async (c) => {
  await signInPerson(c, await finishSlackSignIn(c));
  return continueToConsole(c);
});

/** A page of our own, not a redirect: the session cookie is SameSite=Strict, and a chain that began at the platform would not carry it. */
function continueToConsole(c: Ctx) {
  return c.html(`<!doctype html><meta http-equiv="refresh" content="0;url=${BASE}"><a href="${BASE}">Continue to the console</a>`);
}

consoleRoutes.get("/login/discord", (c) => startDiscordSignIn(c));

consoleRoutes.get("/login/discord/callback", async (c) => {
  const choices = await finishDiscordSignIn(c);
  if (choices.length === 1) {
    await signInPerson(c, choices[0]!.person);
    return continueToConsole(c);
  }
  await keepChoices(c, choices);
  return show(c, {
    title: "Which Discord server?",
    children: (
      <form method="post" action={DISCORD_PICK} class="pick-guild">
        <p>You hold a role in more than one server. Sign in as yourself in:</p>
        {choices.map((choice) => (
          <p>
            <button name="guild" value={choice.guild}>{choice.guildName}</button>
          </p>
        ))}
      </form>
    ),
  });
});

consoleRoutes.post("/login/discord/pick", async (c) => {
  const guild = (await readSignInForm(c)).get("guild") ?? "";
  await signInPerson(c, await pickedPerson(c, guild));
  return continueToConsole(c);
});

/** Every page and action of a tenant checks the viewer's role in it, before anything else: none is a 404, exactly as for a tenant that does not exist. */
function checkTenant(c: Ctx): void {
  const segment = /^\/console\/tenants\/([^/]*)/.exec(c.req.path)?.[1];
  if (segment === undefined) return;
  let tenant = "";
  try {
    tenant = decodeURIComponent(segment);
  } catch {
    // Not a name any tenant has.
  }
  if (roleIn(viewer(c), tenant) === null) throw new HttpError(404, `There is no tenant "${tenant}" here.`);
}

/** Everything but the sign-in page needs a session (or the bearer token); a POST also needs its form's token. */
export const guard: MiddlewareHandler<ConsoleEnv> = async (c, next) => {
  const who = await whoIsAsking(c);
  if (!who) {
    if (c.req.method === "GET" && c.req.header(LIVE_HEADER) === undefined) return c.redirect(`${BASE}/login`, 303);
    return show(c, { title: "Not signed in", children: <p>Your session has ended or never began: <a href={`${BASE}/login`}>sign in</a>.</p> }, 401);
  }
  c.set("who", who);
  c.set("viewer", await viewerOf(c.env, who));
  checkTenant(c);
  if (c.req.method === "POST") {
    const form = await readForm(c);
    if (!(await formTokenValid(c, form.fields))) throw new HttpError(403, "This form's token is missing or is not for this session: reload the page and try again.");
    c.set("form", form);
  }
  await next();
};
consoleRoutes.use("/", guard);
consoleRoutes.use("/logout", guard);
consoleRoutes.use("/tenants/*", guard);

/** Tenant-wide settings, usage and the audit trail: a tenant admin or the platform. */
function requireTenantAdmin(c: Ctx, tenant: string): void {
  if (roleIn(viewer(c), tenant) === "member") throw new HttpError(403, "Only a tenant admin may see or change this.");
}

consoleRoutes.post("/logout", async (c) => {
  await closeSession(c);
  return c.redirect(`${BASE}/login`, 303);
});

// ---- navigation ----------------------------------------------------------------

/** Every pending approval the directory's agents hold, oldest first; an agent that cannot be asked is counted, not fatal. */
async function allPendingApprovals(env: Env): Promise<{ approvals: PendingApproval[]; unreachable: number; truncated: boolean }> {
  const agents = await listAgents(env);
  const asked = agents.slice(0, APPROVALS_FANOUT);
  const answers = await Promise.allSettled(asked.map((route) => agentStub(env, route).pendingHolds({ tenant: route.tenant, agent: route.agent })));
  const approvals = answers.flatMap((answer) => (answer.status === "fulfilled" ? answer.value : []));
  approvals.sort((a, b) => a.createdAt - b.createdAt);
  return { approvals, unreachable: answers.filter((a) => a.status === "rejected").length, truncated: agents.length > asked.length };
}

// An HTML form cannot fill path segments, so the open-agent form comes back here as a query.
consoleRoutes.get("/", async (c) => {
  const tenant = c.req.query("tenant");
  const agent = c.req.query("agent");
  if (tenant !== undefined && agent !== undefined) return c.redirect(agentPath(parseRoute(tenant.trim(), agent.trim())), 303);
  const [tenants, pending] = await Promise.all([listTenants(c.env), allPendingApprovals(c.env)]);
  const mine = (tenant: string) => roleIn(viewer(c), tenant) !== null;
  const approvals = pending.approvals.filter((p) => mine(p.route.tenant));
  return show(c, { title: "Tenants", children: <HomeBody tenants={tenants.filter((t) => mine(t.tenant))} {...pending} approvals={approvals} /> });
});

consoleRoutes.get("/tenants/:tenant", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  const now = Date.now();
  const admin = roleIn(viewer(c), tenant) !== "member";
  const [agents, usage, audit, bounds, roles, keys, secrets] = await Promise.all([
    listAgents(c.env, tenant),
    readUsage(c.env, tenant, Math.floor(now / DAY_MS - (CHART_DAYS - 1)) * DAY_MS, now + 1),
    readAudit(c.env, tenant, {}),
    tenantBounds(c.env, tenant),
    admin ? tenantRoles(c.env, tenant) : [],
    admin ? tenantKeys(c.env, tenant) : [],
    admin ? listTenantSecrets(c.env, tenant) : [],
  ]);
  const platform = roleIn(viewer(c), tenant) === "platform";
  const tokens = admin ? await tokensFor(c, [limitPath(tenant), ...(platform ? [boundsPath(tenant)] : []), ...accessActions(tenant, roles, keys, secrets)]) : new Map<string, string>();
  const name = agents.find((a) => a.displayName)?.displayName;
  return show(c, {
    title: name ? `${name} (${tenant})` : `Tenant ${tenant}`,
    crumbs: [{ href: BASE, label: "Tenants" }],
    children: (
      <>
        <TenantBody tenant={tenant} agents={agents} />
        {admin ? (
          <>
            <UsageSection read={usage} now={now} />
            <LimitSection tenant={tenant} own={usage.reading.limit} bounds={bounds} action={limitPath(tenant)} token={tokens.get(limitPath(tenant)) ?? ""} />
            {platform ? <BoundsSection bounds={bounds} action={boundsPath(tenant)} token={tokens.get(boundsPath(tenant)) ?? ""} /> : null}
            <PeopleSection tenant={tenant} roles={roles} tokens={tokens} />
            <KeysSection tenant={tenant} keys={keys} tokens={tokens} />
            <SecretsSection tenant={tenant} secrets={secrets} tokens={tokens} />
            <AuditSection entries={audit.entries} />
          </>
        ) : null}
      </>
    ),
  });
});

const CURSOR = /^(\d{1,16})\.(.+)$/;

function parseCursor(raw: string | undefined): PageCursor | undefined {
  if (raw === undefined) return undefined;
  const m = CURSOR.exec(raw);
  if (!m || !CONVERSATION_ID.test(m[2]!)) throw new HttpError(400, "invalid page cursor");
  return { updatedAt: Number(m[1]), id: m[2]! };
}

consoleRoutes.get("/tenants/:tenant/agents/:agent", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  const search = (c.req.query("q") ?? "").trim().slice(0, 200);
  const after = parseCursor(c.req.query("after"));
  const stub = agentStub(c.env, route);
  const mark = await stub.changes(route);
  const poll = livePoll(c, mark);
  if (poll === "unchanged") return c.body(null, 204);
  const member = roleIn(viewer(c), route.tenant) === "member";
  const [approvals, listed] = await Promise.all([
    member ? stub.pendingHolds(route, userOf(c)) : stub.pendingHolds(route),
    stub.conversationList(route, { search: search || undefined, after, limit: PAGE_SIZE }),
  ]);
  // A member sees the conversations they started (and the approvals they may decide), no one else's.
  const page = member ? { ...listed, conversations: listed.conversations.filter((s) => s.startedBy === userOf(c).name) } : listed;
  const older = page.next ? new URLSearchParams({ ...(search ? { q: search } : {}), after: `${page.next.updatedAt}.${page.next.id}` }) : undefined;
  const state: AgentListState = { route, approvals, page, search, olderHref: older ? `${agentPath(route)}?${older}` : undefined };
  if (poll === "changed") return liveRegion(c, mark, <AgentLive {...state} />);
  const newConversation = `${agentPath(route)}/conversations`;
  const strategyAction = secondMessagePath(route);
  const tokens = await tokensFor(c, [newConversation, strategyAction]);
  return show(c, {
    title: `Agent ${route.agent}`,
    crumbs: [{ href: BASE, label: "Tenants" }, { href: tenantPath(route.tenant), label: route.tenant }],
    children: (
      <>
        <AgentBody {...state} mark={mark} tokens={tokens} newConversation={newConversation} />
        {member ? null : <SecondMessageSection setting={await secondMessageOf(c.env, route)} action={strategyAction} token={tokens.get(strategyAction) ?? ""} />}
      </>
    ),
  });
});

/** `read`: a child run's page may be read; nothing is sent to a child but by its parent. */
function conversationRoute(c: Ctx, read = false): { route: Route; conversation: string } {
  const route = parseRoute(c.req.param("tenant")!, c.req.param("agent")!);
  const conversation = c.req.param("id")!;
  if (!CONVERSATION_ID.test(conversation) && !(read && CHILD_ID.test(conversation))) throw new HttpError(400, "invalid conversation id");
  return { route, conversation };
}

consoleRoutes.get("/tenants/:tenant/agents/:agent/conversations/:id", async (c) => {
  const { route, conversation: id } = conversationRoute(c, true);
  // The mark is read first: a change after it only makes the next poll draw again.
  const mark = await agentStub(c.env, route).changes(route, id);
  const poll = livePoll(c, mark);
  if (poll === "unchanged") return c.body(null, 204);
  const [read, pending] = await Promise.all([readConversation(c.env, route, id), agentStub(c.env, route).pendingHolds(route, userOf(c))]);
  const decidable = pending.filter((p) => p.conversation === id);
  const me = userOf(c).name;
  const theirs = read.transcript.find((e) => e.role === "user")?.by === me || decidable.length > 0 || read.holds.some((h) => h.decidedBy === me);
  if (roleIn(viewer(c), route.tenant) === "member" && !theirs) {
    throw new HttpError(404, "invalid conversation id");
  }
  // Approve and Deny are offered only where the console's user may decide (APPROVERS, or the one who asked).
  const mayDecide = new Set(decidable.map((p) => p.card.holdId));
  const view = { ...read, holds: read.holds.map((card) => (mayDecide.has(card.holdId) ? card : { ...card, actions: undefined })) };
  const actions = [...view.holds.map((card) => holdPath(route, card.holdId)), ...(["messages", "stop", "compact"] as const).map((a) => actionPath(route, id, a))];
  const props = { route, view, tokens: await tokensFor(c, actions) };
  if (poll === "changed") return liveRegion(c, mark, <ConversationLive {...props} />);
  return show(c, {
    title: `Conversation ${id}`,
    crumbs: [{ href: BASE, label: "Tenants" }, { href: tenantPath(route.tenant), label: route.tenant }, { href: agentPath(route), label: route.agent }],
    children: <ConversationBody {...props} mark={mark} as={actorName(viewer(c))} />,
  });
});

// ---- actions: each is a ChatEvent; the page shows the agent's answer ---------

const eventField = z.string().regex(/^[A-Za-z0-9-]{8,64}$/, "event: a form's event id").optional();
const messageForm = z.object({
  text: z.string().trim().min(1, "Write a message first.").max(32_000, "A message is at most 32,000 characters."),
  event: eventField,
  files: z
    .array(z.instanceof(File).refine((file) => file.name.length <= FILE_NAME_MAX_CHARS, `A file's name is at most ${FILE_NAME_MAX_CHARS} characters.`))
    .max(FILES_MAX_COUNT, `At most ${FILES_MAX_COUNT} files go with one message.`),
});
const bareForm = z.object({ event: eventField });
const strategyChoices = [...SECOND_MESSAGE_STRATEGIES, INHERIT] as const;
const strategyForm = z.object({ strategy: z.enum(strategyChoices, `strategy must be one of ${strategyChoices.join(", ")}`) });
const limitForm = z.object({
  dailyUsd: z
    .string()
    .trim()
    .transform((v) => (v === "" ? null : Number(v)))
    .refine((v) => v === null || (Number.isFinite(v) && v >= 0 && v <= 1e9), "The limit is a number of USD, 0 or more, or empty for none."),
});
const decisionForm = z.object({
  approve: z.enum(["1", "0"], "approve must be 1 or 0"),
  conversation: z.string().regex(CONVERSATION_ID, "invalid conversation id"),
  event: eventField,
});

function parseForm<T>(c: Ctx, schema: z.ZodType<T>): T {
  const form = c.get("form");
  const parsed = schema.safeParse({ ...Object.fromEntries(form?.fields ?? []), files: form?.files ?? [] });
  if (!parsed.success) throw new HttpError(400, z.prettifyError(parsed.error));
  return parsed.data;
}

/** The event id: the form's own (so a resubmitted form is one event), or a fresh one for a script. */
function eventId(event: string | undefined): string {
  return `console:${event ?? crypto.randomUUID()}`;
}

/** What happened, in the words of the agent's answer. */
function answerText(result: SubmitResult, done: string): string {
  if (!result.accepted) return "This form was already sent; nothing more was done.";
  if (result.notice) return result.notice;
  return `${done} The conversation is now: ${stateWords(result.status).toLowerCase()}.`;
}

/** A stop, a compact or a decision is written to the audit trail by the agent, with the change (runtime/object/audit-outbox.ts). */
async function act(c: Ctx, route: Route, event: ChatEvent, done: string) {
  const result = await submitEvent(c.env, route, event);
  await setResult(c, answerText(result, done));
  return c.redirect(conversationPath(route, result.conversation), 303);
}

/** A message form's event: its text and files, the files read (and refused past their caps) before anything is written. */
async function messageEvent(c: Ctx, conversation: string): Promise<ChatEvent> {
  const { text, event, files } = parseForm(c, messageForm);
  const attachments = await attachmentsOf(files);
  return { id: eventId(event), kind: "message", conversation, text, user: userOf(c), ...(attachments.length > 0 ? { attachments } : {}) };
}

consoleRoutes.post("/tenants/:tenant/agents/:agent/conversations", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  return act(c, route, await messageEvent(c, `console-${crypto.randomUUID()}`), "Sent.");
});

const conversationAction = (action: ConversationAction) => `/tenants/:tenant/agents/:agent/conversations/:id/${action}`;


consoleRoutes.post(conversationAction("messages"), async (c) => {
  const { route, conversation } = conversationRoute(c);
  return act(c, route, await messageEvent(c, conversation), "Sent.");
});

consoleRoutes.post(conversationAction("stop"), async (c) => {
  const { route, conversation } = conversationRoute(c);
  const { event } = parseForm(c, bareForm);
  return act(c, route, { id: eventId(event), kind: "interrupt", conversation, user: userOf(c) }, "Stopped.");
});

consoleRoutes.post(conversationAction("compact"), async (c) => {
  const { route, conversation } = conversationRoute(c);
  const { event } = parseForm(c, bareForm);
  return act(c, route, { id: eventId(event), kind: "command", command: "compact", conversation, user: userOf(c) }, "Compacting.");
});

consoleRoutes.post("/tenants/:tenant/limits", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const { dailyUsd } = parseForm(c, limitForm);
  const after = dailyUsd === null ? null : { dailyUsd, exempt: false };
  // The platform's bounds bind a tenant admin, as they bind the tenant's keys on /v1; the platform is not bound.
  if (roleIn(viewer(c), tenant) !== "platform") await checkBounds(c.env, tenant, { limit: after });
  const before = await setTenantLimit(c.env, tenant, after);
  await recordChange(c.env, { tenant, actor: actorName(viewer(c)), action: after === null ? "limits.remove" : "limits.set", subject: `/tenants/${tenant}/limits`, before, after });
  await setResult(c, after === null ? "This tenant now has no limit of its own." : `This tenant's daily limit is now ${after.dailyUsd} USD.`);
  return c.redirect(tenantPath(tenant), 303);
});

consoleRoutes.post("/tenants/:tenant/agents/:agent/second-message", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  requireTenantAdmin(c, route.tenant);
  const { strategy } = parseForm(c, strategyForm);
  // Setting it twice is the same as once: a resubmitted form needs no event id. Its trail row is written with it.
  const after = strategy === INHERIT ? null : strategy;
  const audit = { actor: actorName(viewer(c)), action: after === null ? "second-message.remove" : "second-message.set", subject: `/tenants/${route.tenant}/agents/${route.agent}/second-message`, after };
  await changeSetting(c.env, "secondMessage", route, "agent", after, audit);
  await setResult(c, strategy === INHERIT ? "This agent now follows its tenant's strategy for a second message." : `A second message while this agent works is now handled by: ${strategy}.`);
  return c.redirect(agentPath(route), 303);
});

/** Empty fields: no bound. */
const boundsForm = z.preprocess((form) => {
  const { maxDailyUsd = "", models = "" } = form as Record<string, string | undefined>;
  const ceiling = maxDailyUsd.trim();
  const names = models.split(/[\s,]+/).filter(Boolean);
  return { maxDailyUsd: ceiling === "" ? null : Number(ceiling), models: names.length === 0 ? null : names };
}, tenantBoundsSchema);

consoleRoutes.post("/tenants/:tenant/bounds", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  if (roleIn(viewer(c), tenant) !== "platform") throw new HttpError(403, "Only the platform sets a tenant's bounds.");
  const after = parseForm(c, boundsForm);
  await setTenantBounds(c.env, tenant, after, actorName(viewer(c)));
  await setResult(c, "This tenant's bounds are set.");
  return c.redirect(`${tenantPath(tenant)}#bounds`, 303);
});

// ---- people and keys (console/access.tsx): the calls /v1 makes, as the signed-in person ----

const roleForm = z.object({ identity: identitySchema, role: tenantRoleSchema });
/** The form's fields as the API's body (an empty agent: every agent); newKeyBody refuses anything else. */
const keyForm = z.preprocess((form) => {
  const { name, access, agent } = form as Record<string, string | undefined>;
  return { name, access, agent: agent?.trim() || undefined };
}, newKeyBody);
const keyEvent = z.object({ event: eventField });

consoleRoutes.post("/tenants/:tenant/roles", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const { identity, role } = parseForm(c, roleForm);
  const { before } = await setTenantRole(c.env, tenant, identity, role, actorName(viewer(c)));
  await setResult(c, before === role ? `${identity} already was ${role}.` : `${identity} is now ${role} of this tenant.`);
  return c.redirect(`${tenantPath(tenant)}#people`, 303);
});

consoleRoutes.post("/tenants/:tenant/roles/:identity/remove", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const parsed = identitySchema.safeParse(c.req.param("identity"));
  if (!parsed.success) throw new HttpError(400, z.prettifyError(parsed.error));
  const identity = parsed.data;
  await setTenantRole(c.env, tenant, identity, null, actorName(viewer(c)));
  await setResult(c, `${identity} no longer has a role in this tenant.`);
  return c.redirect(`${tenantPath(tenant)}#people`, 303);
});

consoleRoutes.post("/tenants/:tenant/keys", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const spec = parseForm(c, keyForm);
  // The form's event id names the key: the same form sent again makes no second one.
  const { event } = parseForm(c, keyEvent);
  const made = await createTenantKey(c.env, tenant, spec, actorName(viewer(c)), event);
  // Answered here, not redirected: the key is shown on this one page and nowhere again.
  return show(c, { title: "API key made", crumbs: [{ href: BASE, label: "Tenants" }, { href: tenantPath(tenant), label: tenant }], children: <NewKeyBody tenant={tenant} made={made} /> }, 201);
});

consoleRoutes.post("/tenants/:tenant/keys/:keyId/revoke", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const row = await revokeTenantKey(c.env, tenant, c.req.param("keyId"), actorName(viewer(c)));
  await setResult(c, `Key "${row.name}" (${row.id}) is revoked: it is refused from now on.`);
  return c.redirect(`${tenantPath(tenant)}#keys`, 303);
});

const secretForm = z.object({ name: secretNameSchema, value: secretBody.shape.value });

consoleRoutes.post("/tenants/:tenant/secrets", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const { name, value } = parseForm(c, secretForm);
  await setSecret(c.env, tenant, name, value, actorName(viewer(c)));
  await setResult(c, `Secret ${name} is set. Its value is sealed and will not be shown again.`);
  return c.redirect(`${tenantPath(tenant)}#secrets`, 303);
});

consoleRoutes.post("/tenants/:tenant/secrets/:name/delete", async (c) => {
  const { tenant } = parseRoute(c.req.param("tenant"), "any");
  requireTenantAdmin(c, tenant);
  const parsed = secretNameSchema.safeParse(c.req.param("name"));
  if (!parsed.success) throw new HttpError(400, z.prettifyError(parsed.error));
  await deleteSecret(c.env, tenant, parsed.data, actorName(viewer(c)));
  await setResult(c, `Secret ${parsed.data} is deleted: a mount or model choice naming it is refused from now on.`);
  return c.redirect(`${tenantPath(tenant)}#secrets`, 303);
});

consoleRoutes.post("/tenants/:tenant/agents/:agent/holds/:holdId", async (c) => {
  const route = parseRoute(c.req.param("tenant"), c.req.param("agent"));
  const holdId = c.req.param("holdId");
  if (!HOLD_ID.test(holdId)) throw new HttpError(400, "invalid hold id");
  const { approve, conversation, event } = parseForm(c, decisionForm);
  // The object decides whether console:admin may sign (APPROVERS), as for any other person.
  return act(c, route, { id: eventId(event), kind: "decision", conversation, holdId, approve: approve === "1", boundTo: route, user: userOf(c) }, approve === "1" ? "Approved." : "Denied.");
});

// ---- errors --------------------------------------------------------------------

consoleRoutes.onError((err, c) => {
  if (err instanceof HttpError) {
    if (err.retryAfterSeconds !== undefined) c.header("retry-after", String(err.retryAfterSeconds));
    return show(c, { title: `Error ${err.status}`, children: <p>{err.message}</p> }, err.status);
  }
  if (err instanceof HTTPException && err.status === 403) {
    // hono/csrf: a form posted from another site (or by a script that sent no Origin header).
    return show(c, { title: "Refused", children: <p>This form was not sent from this console's own pages, so nothing was done.</p> }, 403);
  }
  if (err instanceof ConfigError) {
    console.error(err.message);
    return show(c, { title: "Configuration error", children: <p>{err.message}</p> }, 503);
  }
  const migration = migrationFailure(err);
  if (migration !== null) return show(c, { title: "Unavailable", children: <p>{migration}</p> }, 503);
  console.error("console: unhandled error", err);
  return show(c, { title: "Error", children: <p>Internal error.</p> }, 500);
});
