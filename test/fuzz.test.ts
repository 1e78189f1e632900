// A bounded, seeded fuzz of every route the Worker serves (worker.ts, the
// bridges, the console): signed and unsigned mutations of valid requests — bad,
// missing and stale signatures, malformed JSON, wrong content types, oversized
// and deep bodies, boundary strings, lone surrogates, prototype names as ids
// and tenants, wrong types in every field. No answer may be a 5xx, and no
// request that failed verification may write anything: no agent object row,
// no control-plane row. The same seed makes the same requests.
//
// Requests go straight to the Worker's fetch handler with the pool's real env
// (objects, queue, R2): through exports.default.fetch each request costs
// milliseconds of harness overhead, which would make 50,000 of them take minutes.
import { env } from "cloudflare:workers";
import { createExecutionContext, listDurableObjectIds, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { decisionValue } from "../approvals/index.ts";
import { signatureHeaders } from "../bridges/shared/signed-request.ts";
import type { AgentObject } from "../runtime/object/index.ts";
import { tablesOf } from "./agents.ts";
import { ed25519 } from "./bridges/discord/helpers.ts";
import { slackSignature } from "./bridges/slack/helpers.ts";
import { chatToken } from "./bridges/gchat/helpers.ts";
import { SERVICE_URL as TEAMS_SERVICE_URL, sign as teamsToken } from "./bridges/teams/helpers.ts";
import { secretFor } from "./bridges/telegram/helpers.ts";
import handler from "./worker-under-test.ts";

/** Change it to explore; a failure names the seed, route and request index that reproduce it. */
const SEED = 20261129;
const PER_ROUTE = 2000;
/** Requests in flight at once. */
const PARALLEL = 24;

const E = env as unknown as Record<string, string>;
const ADMIN = E.ADMIN_TOKEN!;

// ---- a seeded generator ----------------------------------------------------------

class Gen {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }
  /** mulberry32 */
  next(): number {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

function hash(text: string): number {
  let h = 2166136261;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 16777619);
  return h >>> 0;
}

const PROTO_NAMES = ["constructor", "__proto__", "toString", "valueOf", "hasOwnProperty", "prototype", "isPrototypeOf", "__defineGetter__"];
const BOUNDARY_STRINGS = [
  "",
  " ",
  "a",
  "x".repeat(129),
  "x".repeat(201),
  "y".repeat(5000),
  "\u0000",
  "\ud800",
  "\udfff",
  "a\ud800b",
  "\ud83d\ude00",
  "\u202e",
  "%00",
  "%2F",
  "../..",
  "a/b",
  "a:b:c",
  "hold:approve:a:b:c",
  "hold:approve:fuzz:assistant:h0000000000000000",
  "<script>alert(1)</script>",
  "' OR 1=1 --",
  "null",
  "NaN",
  "-1",
  "1e400",
  "0x10",
  "\n\r\t",
  ...PROTO_NAMES,
];

function randomValue(g: Gen, depth = 0): unknown {
  switch (g.int(depth > 2 ? 8 : 11)) {
    case 0:
      return null;
    case 1:
      return g.chance(0.5);
    case 2:
      return g.pick([0, -1, 1.5, 2 ** 53 + 1, -0, 1e308, 42]);
    case 3:
    case 4:
    case 5:
    case 6:
      return g.pick(BOUNDARY_STRINGS);
    case 7:
      return String(g.int(1e9));
    case 8:
      return [randomValue(g, depth + 1), randomValue(g, depth + 1)];
    case 9:
      return { [g.pick(PROTO_NAMES)]: randomValue(g, depth + 1), x: randomValue(g, depth + 1) };
    default:
      return {};
  }
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Paths to every value inside a JSON template. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  return out;
}

/**
 * One field-level mutation, sometimes two or three: most often a string field
 * set to a boundary string (so the rest stays valid and the value reaches the
 * code that uses it), else any field set to a value of another type, removed,
 * or joined by a prototype-named key.
 */
function mutateFields(g: Gen, template: Json): Json {
  let value = structuredClone(template) as Json;
  const times = g.chance(0.7) ? 1 : 2 + g.int(2);
  for (let n = 0; n < times; n++) {
    const all = paths(value).filter((p) => p.length > 0);
    const strings = all.filter((p) => typeof at(value, p) === "string");
    const roll = g.int(20);
    const path = roll < 10 && strings.length > 0 ? g.pick(strings) : all.length > 0 ? g.pick(all) : null;
    if (!path) {
      value = randomValue(g) as Json;
      continue;
    }
    const parent = at(value, path.slice(0, -1)) as Record<string | number, Json>;
    const key = path.at(-1)!;
    if (roll < 10) parent[key] = g.pick(BOUNDARY_STRINGS);
    else if (roll < 16) parent[key] = randomValue(g) as Json;
    else if (roll < 18 && !Array.isArray(parent)) delete parent[key];
    else Object.defineProperty(parent, g.pick(PROTO_NAMES), { value: randomValue(g), enumerable: true, configurable: true, writable: true });
  }
  return value;
}

function at(value: Json, path: (string | number)[]): Json {
  return path.reduce<Json>((v, k) => (v as Record<string | number, Json>)[k]!, value);
}

const MALFORMED = ['{"a":', "{", "[", "nul", "{'a':1}", '{"a":1,}', "\u0000", '"unterminated', "{}}", "1 2"];

/** The raw body: usually the template with field mutations, sometimes something no parser should accept. */
function body(g: Gen, template: Json, limit: number, encode: (value: Json) => string): string | Uint8Array {
  const roll = g.int(20);
  if (roll === 0) return g.pick(MALFORMED);
  if (roll === 1) return "";
  if (roll === 2) return encode({ pad: "z".repeat(limit + 1 + g.int(1000)) });
  if (roll === 3) return `${"[".repeat(20_000 + g.int(100_000))}${"]".repeat(20_000)}`;
  if (roll === 4) return new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0xc3, 0x28, 0x22, 0x7d]); // invalid UTF-8
  if (roll === 5) return deep(encode(template), 200 + g.int(5000));
  if (roll === 6) return encode(template).replace(/"[^"]*"/, JSON.stringify(g.pick(["\ud800", "\udc00x", "a\ud83d"])));
  if (roll < 10) return encode(template);
  return encode(mutateFields(g, template));
}

/** The body nested `depth` objects down (built as text: JSON.stringify itself would overflow). */
function deep(encoded: string, depth: number): string {
  return `${'{"a":'.repeat(depth)}${encoded}${"}".repeat(depth)}`;
}

const json = (v: Json) => JSON.stringify(v);
const form = (v: Json) => {
  if (!v || typeof v !== "object" || Array.isArray(v)) return JSON.stringify(v);
  return new URLSearchParams(Object.entries(v).map(([k, x]) => [k, typeof x === "string" ? x : JSON.stringify(x)])).toString();
};

// ---- the routes -------------------------------------------------------------------

type Auth =
  | { kind: "public" }
  | { kind: "bearer" }
  | { kind: "slack" }
  | { kind: "antiproton"; secret: string }
  | { kind: "discord" }
  | { kind: "telegram" }
  | { kind: "gchat" }
  | { kind: "teams" };

interface RouteSpec {
  name: string;
  method: string;
  path: (g: Gen, seg: (valid: string) => string) => string;
  auth: Auth;
  /** The content type its body must have, and its size limit. */
  body?: { type: string; limit: number; encode: (v: Json) => string; template: (g: Gen) => Json };
}

const TENANTS = ["fuzz", "constructor", "toString", "T0FUZZ"];
const now = () => Math.floor(Date.now() / 1000);
const ts = (g: Gen) => `${now()}.${String(g.int(999999)).padStart(6, "0")}`;

const slackEnvelope = (g: Gen): Json => ({
  type: "event_callback",
  team_id: g.pick(TENANTS),
  event_id: `Ev${g.int(1e9)}`,
  authorizations: [{ team_id: g.pick(TENANTS), user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: false }],
  event: { type: g.pick(["app_mention", "message"]), user: g.pick(["U1", "UFAKEBOT", ...PROTO_NAMES]), text: `<@UFAKEBOT> fuzz ${g.int(3)}`, ts: ts(g), channel: g.pick(["CFUZZ", "constructor"]), channel_type: g.pick(["channel", "im"]) },
});

const slashCommand = (g: Gen): Json => ({
  team_id: g.pick(TENANTS),
  channel_id: g.pick(["CFUZZ", "__proto__"]),
  user_id: g.pick(["U1", "toString"]),
  command: "/agent",
  text: g.pick(["status", "stop", "compact", "help", ""]),
  trigger_id: String(g.int(1e9)),
});

const blockActions = (g: Gen): Json => ({
  type: "block_actions",
  user: { id: g.pick(["U1", "valueOf"]), team_id: g.pick(TENANTS) },
  team: { id: g.pick(TENANTS) },
  channel: { id: "CFUZZ" },
  container: { channel_id: "CFUZZ", message_ts: ts(g), thread_ts: ts(g) },
  message: { ts: ts(g) },
  response_url: g.pick([`${E.FAKE_SLACK_URL}/response/fuzz`, "http://127.0.0.1:9/nobody-listens", "not a url", ""]),
  actions: [{ action_id: g.pick(["approve", "deny", "antiproton_stop"]), value: g.pick([decisionValue("fuzz", "assistant", "h0", true), "stop:fuzz:assistant:c1", "x"]), action_ts: ts(g) }],
});

const discordInteraction = (g: Gen): Json => {
  const user = { id: g.pick(["1033044521375764530", "constructor"]), username: "fuzzer", global_name: null };
  const base = { id: String(g.int(1e15)), application_id: E.DISCORD_APPLICATION_ID!, token: "tok", guild_id: g.pick(["424242", "toString"]), channel_id: g.pick(["1457510428359004343", "x"]), member: { user } };
  switch (g.int(3)) {
    case 0:
      return { type: 1 };
    case 1:
      return { ...base, type: 2, data: { id: "1", name: g.pick(["ask", "status", "stop", "compact", "nope"]), type: 1, options: [{ name: "text", type: 3, value: "fuzz" }] } };
    default:
      return { ...base, type: 3, data: { custom_id: decisionValue("424242", "assistant", "h0", g.chance(0.5)), component_type: 2 } };
  }
};

const gatewayMessage = (g: Gen): Json => ({
  id: String(g.int(1e15)),
  channel_id: g.pick(["1457510428359004343", "2"]),
  guild_id: g.pick(["424242", null, "constructor"]),
  content: `<@${E.DISCORD_APPLICATION_ID}> fuzz`,
  author: { id: g.pick(["1033044521375764530", "hasOwnProperty"]), username: "fuzzer", bot: false },
});

/** A path's n-th segment as the router reads it (a boundary string's invalid UTF-8 stays as sent). */
function pathSegment(path: string, n: number): string {
  const raw = path.split("/")[n] ?? "";
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** A Telegram bot of the fakes' (test/fakes/telegram.mjs), and its people and chats. */
const TELEGRAM_TENANT = "tgbot";

const telegramUpdate = (g: Gen): Json => {
  const from = { id: g.pick([7527593, 8765336106, 2 ** 53 + 1]), is_bot: g.chance(0.1), first_name: "Fuzz" };
  const chat = { id: g.pick([7527593, -1001234567890]), type: g.pick(["private", "supergroup", "channel"]) };
  const text = g.pick(["@vercelchatsdkbot fuzz", "/stop@vercelchatsdkbot", "/status", "fuzz"]);
  const message = { message_id: g.int(1e6), from, chat, date: now(), text, entities: [{ type: g.pick(["mention", "bot_command"]), offset: 0, length: text.split(" ")[0]!.length }], ...(g.chance(0.2) ? { message_thread_id: 7, is_topic_message: true } : {}) };
  return g.chance(0.7)
    ? { update_id: g.int(1e9), message }
    : { update_id: g.int(1e9), callback_query: { id: String(g.int(1e9)), from, message, data: g.pick(["a:h0", "d:h0", "x"]) } };
};

/** A Google Chat event in either form Chat sends (the Chat API's, a Workspace add-on's), of each kind the bridge reads. */
const gchatEvent = (g: Gen): Json => {
  const user: Json = { name: g.pick(["users/100000000000000000001", "users/constructor"]), displayName: "Fuzz", type: g.pick(["HUMAN", "BOT"]), domainId: g.pick(["12juw1z", "__proto__", null]) };
  const space = { name: g.pick(["spaces/AAQAO1heGsE", "spaces/jLQ7DiAAAAE"]), type: g.pick(["ROOM", "DM"]) };
  const text = g.pick(["@Chat SDK Demo fuzz", "/stop", "fuzz"]);
  const annotation: Json = g.chance(0.5) ? { type: "USER_MENTION", startIndex: 0, length: 14, userMention: { user: { name: "users/100000000000000000002", type: "BOT" } } } : { type: "SLASH_COMMAND", slashCommand: { commandName: g.pick(["/stop", "/status", "/nope"]) } };
  const message: Json = {
    name: `${space.name}/messages/m${g.int(1e9)}`,
    sender: user,
    text,
    argumentText: g.pick([text, null]),
    annotations: [annotation],
    thread: { name: `${space.name}/threads/t${g.int(10)}` },
  };
  const parameters = { decision: g.pick([decisionValue(TENANT_GCHAT, "assistant", "h0", true), "x"]) };
  const kind = g.pick(["MESSAGE", "CARD_CLICKED", "ADDED_TO_SPACE", "REMOVED_FROM_SPACE", "OTHER"]);
  const eventTime = new Date().toISOString();
  if (g.chance(0.5)) return { type: kind, eventTime, space, user, message, common: { parameters } };
  const payload = { MESSAGE: "messagePayload", CARD_CLICKED: "buttonClickedPayload", ADDED_TO_SPACE: "addedToSpacePayload", REMOVED_FROM_SPACE: "removedFromSpacePayload", OTHER: "appCommandPayload" }[kind]!;
  return { commonEventObject: { parameters }, chat: { user, eventTime, [payload]: { space, message } } };
};
const TENANT_GCHAT = "gchat";
/** A Bot Framework activity to the fakes' Teams app (test/fakes/teams.mjs): messages, card clicks, installs. */
const teamsActivity = (g: Gen): Json => JSON.parse(JSON.stringify(teamsActivityOf(g))) as Json;

/** An activity, undefined fields included (JSON drops them: a field Teams leaves out). */
const teamsActivityOf = (g: Gen) => {
  const base = {
    id: String(g.int(1e12)),
    channelId: "msteams",
    serviceUrl: TEAMS_SERVICE_URL,
    from: { id: g.pick(["29:fuzz", "constructor"]), name: "Fuzz", ...(g.chance(0.5) ? { aadObjectId: "7a9b12a6-4f02-43f1-b6f9-fd10e047f903" } : {}) },
    recipient: { id: "28:11111111-2222-3333-4444-555555555555", name: "Agent" },
    conversation: { id: g.pick(["a:1fuzz", "19:fuzz@thread.tacv2;messageid=1", "19:g@thread.v2"]), conversationType: g.pick(["personal", "channel", "groupChat", undefined]), tenantId: g.pick(["a1b2c3d4-e5f6-7890-abcd-ef1234567890", "toString", undefined]) },
  };
  switch (g.int(4)) {
    case 0:
      return { ...base, type: "message", text: g.pick(["<at>Agent</at> fuzz", "stop", "status", "fuzz"]), entities: [{ type: "mention", mentioned: base.recipient, text: "<at>Agent</at>" }] };
    case 1:
      return { ...base, type: "invoke", name: "adaptiveCard/action", value: { action: { type: "Action.Execute", verb: "approve", data: { holdDecision: decisionValue("fuzz", "assistant", "h0", g.chance(0.5)) } } } };
    case 2:
      return { ...base, type: "message", value: g.pick([{ holdDecision: "x" }, { actionId: "other" }]) };
    default:
      return { ...base, type: g.pick(["installationUpdate", "conversationUpdate"]), action: g.pick(["add", "remove"]), membersRemoved: [base.recipient] };
  }
};

/** The webhook's own tenant: tenants belong to the bridge that brought them, and "fuzz" is the other bridges'. */
const WEBHOOK_TENANT = "fuzzhook";

const webhookEvent = (g: Gen): Json => {
  const base = { tenant: WEBHOOK_TENANT, idempotency_key: `k${g.int(1e9)}`, conversation: g.pick(["c1", "c2"]), user: { id: g.pick(["u1", "constructor"]), name: "Fuzz" } };
  switch (g.int(4)) {
    case 0:
      return { ...base, type: "message", text: "fuzz" };
    case 1:
      return { ...base, type: "command", command: g.pick(["status", "stop", "compact"]) };
    case 2:
      return { ...base, type: "decision", value: decisionValue("fuzz", "assistant", "h0", true) };
    default:
      return { ...base, type: "interrupt" };
  }
};

const mounts = (g: Gen): Json => [
  { alias: g.pick(["clock", "memory", "x_1"]), plugin: g.pick(["clock", "memory", "http", "nope"]), config: g.pick<Json>([{}, { allowedHosts: ["example.com"] }]), policy: { write: g.pick(["allow", "deny", "approval"]), tools: { [g.pick(PROTO_NAMES)]: "deny" } } },
];

const JSON_64K = 64 * 1024;
const ROUTES: RouteSpec[] = [
  { name: "GET /", method: "GET", path: () => "/", auth: { kind: "public" } },
  {
    name: "POST /v1/tenants/:t/agents/:a/messages",
    method: "POST",
    path: (g, seg) => `/v1/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}/messages`,
    auth: { kind: "bearer" },
    body: { type: "application/json", limit: JSON_64K, encode: json, template: (g) => ({ text: "fuzz", conversation: g.pick(["c1", "c2"]), kind: g.pick(["message", "steer", "interrupt"]) }) },
  },
  { name: "GET /v1/tenants/:t/agents/:a/conversations/:id", method: "GET", path: (g, seg) => `/v1/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}/conversations/${seg("c1")}`, auth: { kind: "bearer" } },
  { name: "PUT /v1/tenants/:t/mounts", method: "PUT", path: (g, seg) => `/v1/tenants/${seg(g.pick(TENANTS))}/mounts`, auth: { kind: "bearer" }, body: { type: "application/json", limit: JSON_64K, encode: json, template: mounts } },
  { name: "PUT /v1/tenants/:t/agents/:a/mounts", method: "PUT", path: (g, seg) => `/v1/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}/mounts`, auth: { kind: "bearer" }, body: { type: "application/json", limit: JSON_64K, encode: json, template: mounts } },
  { name: "GET /v1/tenants/:t/agents/:a/mounts", method: "GET", path: (g, seg) => `/v1/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}/mounts`, auth: { kind: "bearer" } },
  {
    name: "PUT /v1/webhook/tenants/:t",
    method: "PUT",
    path: (g, seg) => `/v1/webhook/tenants/${seg(g.pick(TENANTS))}`,
    auth: { kind: "bearer" },
    body: { type: "application/json", limit: 4096, encode: json, template: (g) => ({ callback_url: g.pick([`${E.FAKE_CALLBACK_URL}/hooks/fuzz`, "https://example.com/hook", "not a url", "%00", ""]) }) },
  },
  { name: "GET /v1/webhook/tenants/:t", method: "GET", path: (g, seg) => `/v1/webhook/tenants/${seg(g.pick(TENANTS))}`, auth: { kind: "bearer" } },
  { name: "DELETE /v1/webhook/tenants/:t", method: "DELETE", path: (g, seg) => `/v1/webhook/tenants/${seg(g.pick(["gone", "constructor", "toString", "fuzz"]))}`, auth: { kind: "bearer" } },
  { name: "GET /console/login", method: "GET", path: () => "/console/login", auth: { kind: "public" } },
  { name: "POST /console/login", method: "POST", path: () => "/console/login", auth: { kind: "public" }, body: { type: "application/x-www-form-urlencoded", limit: 8192, encode: form, template: (g) => ({ token: g.pick(["wrong", "", ...PROTO_NAMES]) }) } },
  { name: "POST /console/logout", method: "POST", path: () => "/console/logout", auth: { kind: "public" } },
  { name: "GET /console", method: "GET", path: (g, seg) => `/console?tenant=${seg(g.pick(TENANTS))}&agent=${seg("assistant")}`, auth: { kind: "bearer" } },
  { name: "GET /console/tenants/:t/agents/:a", method: "GET", path: (g, seg) => `/console/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}`, auth: { kind: "bearer" } },
  { name: "GET /console/tenants/:t/agents/:a/conversations/:id", method: "GET", path: (g, seg) => `/console/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}/conversations/${seg("c1")}?notice=${seg("hi")}`, auth: { kind: "bearer" } },
  {
    name: "POST /console/tenants/:t/agents/:a/holds/:id",
    method: "POST",
    path: (g, seg) => `/console/tenants/${seg(g.pick(TENANTS))}/agents/${seg("assistant")}/holds/${seg("h0")}`,
    auth: { kind: "bearer" },
    body: { type: "application/x-www-form-urlencoded", limit: 8192, encode: form, template: (g) => ({ approve: g.pick(["1", "0"]), conversation: "c1" }) },
  },
  { name: "POST /slack/events", method: "POST", path: () => "/slack/events", auth: { kind: "slack" }, body: { type: "application/json", limit: 1 << 20, encode: json, template: slackEnvelope } },
  { name: "POST /slack/commands", method: "POST", path: () => "/slack/commands", auth: { kind: "slack" }, body: { type: "application/x-www-form-urlencoded", limit: 256 * 1024, encode: form, template: slashCommand } },
  {
    name: "POST /slack/interactivity",
    method: "POST",
    path: () => "/slack/interactivity",
    auth: { kind: "slack" },
    body: { type: "application/x-www-form-urlencoded", limit: 256 * 1024, encode: (v) => form({ payload: json(v) }), template: blockActions },
  },
  {
    name: "POST /slack/forward",
    method: "POST",
    path: () => "/slack/forward",
    auth: { kind: "antiproton", secret: "SLACK_SOCKET_FORWARD_SECRET" },
    body: {
      type: "application/json",
      limit: 1 << 20,
      encode: json,
      template: (g) => g.pick([{ kind: "events_api", body: slackEnvelope(g) }, { kind: "slash_commands", body: slashCommand(g) }, { kind: "interactive", body: blockActions(g) }]),
    },
  },
  { name: "GET /slack/install", method: "GET", path: () => "/slack/install", auth: { kind: "public" } },
  { name: "GET /slack/oauth/callback", method: "GET", path: (_g, seg) => `/slack/oauth/callback?code=${seg("c")}&state=${seg(`${now()}.n.${"0".repeat(64)}`)}`, auth: { kind: "public" } },
  { name: "POST /discord/interactions", method: "POST", path: () => "/discord/interactions", auth: { kind: "discord" }, body: { type: "application/json", limit: JSON_64K, encode: json, template: discordInteraction } },
  {
    name: "POST /discord/gateway-events",
    method: "POST",
    path: () => "/discord/gateway-events",
    auth: { kind: "antiproton", secret: "DISCORD_GATEWAY_SECRET" },
    body: { type: "application/json", limit: JSON_64K, encode: json, template: gatewayMessage },
  },
  {
    name: "POST /telegram/:t/webhook",
    method: "POST",
    path: (_g, seg) => `/telegram/${seg(TELEGRAM_TENANT)}/webhook`,
    auth: { kind: "telegram" },
    body: { type: "application/json", limit: 256 * 1024, encode: json, template: telegramUpdate },
  },
  {
    name: "POST /gchat/events",
    method: "POST",
    path: () => "/gchat/events",
    auth: { kind: "gchat" },
    body: { type: "application/json", limit: 256 * 1024, encode: json, template: gchatEvent },
  },
  {
    name: "POST /teams/api/messages",
    method: "POST",
    path: () => "/teams/api/messages",
    auth: { kind: "teams" },
    body: { type: "application/json", limit: 256 * 1024, encode: json, template: teamsActivity },
  },
  {
    name: "POST /webhook/:t/events",
    method: "POST",
    path: (_g, seg) => `/webhook/${seg(WEBHOOK_TENANT)}/events`,
    auth: { kind: "antiproton", secret: "WEBHOOK_SECRET" },
    body: { type: "application/json", limit: JSON_64K, encode: json, template: webhookEvent },
  },
];

// ---- building one request ------------------------------------------------------------

const WRONG_TYPES = ["", "text/plain", "application/json; charset=utf-8", "APPLICATION/JSON", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx"];

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** Percent-encodes any string; a lone surrogate becomes the bytes a careless encoder would send for it (invalid UTF-8). */
function percentEncoded(text: string): string {
  return encodeURIComponent(text.replace(LONE_SURROGATE, "\ue000")).replaceAll("%EE%80%80", "%ED%A0%80");
}

/** A path segment: usually the valid one, sometimes a boundary or prototype name. */
const segment = (g: Gen) => (valid: string) => percentEncoded(g.chance(0.15) ? g.pick(BOUNDARY_STRINGS) : valid);

/** What a header can carry at all: visible ASCII and spaces. */
const HEADER_SAFE = BOUNDARY_STRINGS.filter((s) => /^[\x20-\x7e]*$/.test(s));

async function build(route: RouteSpec, g: Gen, verified: boolean, bearer = ADMIN): Promise<{ path: string; init: RequestInit }> {
  const path = route.path(g, segment(g));
  const headers: Record<string, string> = {};
  let raw: string | Uint8Array | undefined;
  if (route.body) {
    raw = body(g, route.body.template(g), route.body.limit, route.body.encode);
    headers["content-type"] = g.chance(0.1) ? g.pick(WRONG_TYPES) : route.body.type;
  } else if (route.method !== "GET" && g.chance(0.3)) {
    raw = g.pick(MALFORMED);
    headers["content-type"] = g.pick(WRONG_TYPES);
  }
  const text = raw === undefined ? "" : typeof raw === "string" ? raw : new TextDecoder().decode(raw);
  const stamp = String(now());
  const auth = route.auth;
  if (verified) {
    if (auth.kind === "bearer") headers.authorization = `Bearer ${bearer}`;
    if (auth.kind === "slack") Object.assign(headers, { "x-slack-request-timestamp": stamp, "x-slack-signature": await slackSignature(text, stamp) });
    if (auth.kind === "antiproton") Object.assign(headers, await signatureHeaders(E[auth.secret]!, text));
    if (auth.kind === "discord") Object.assign(headers, { "x-signature-timestamp": stamp, "x-signature-ed25519": await ed25519(stamp + text) });
    if (auth.kind === "telegram") headers["x-telegram-bot-api-secret-token"] = await secretFor(pathSegment(path, 2));
    if (auth.kind === "gchat") headers.authorization = `Bearer ${await chatToken()}`;
    if (auth.kind === "teams") headers.authorization = `Bearer ${await teamsToken()}`;
  } else {
    const stale = String(now() - 301 - g.int(100_000));
    const wrongHex = Array.from({ length: 64 }, () => "0123456789abcdef"[g.int(16)]).join("");
    const roll = g.int(6);
    if (auth.kind === "bearer" || auth.kind === "public") {
      if (roll > 0) headers.authorization = g.pick([`Bearer ${ADMIN}x`, "Bearer", `Bearer${ADMIN}`, `Basic ${btoa(`admin:${ADMIN}`)}`, `Bearer ${g.pick(HEADER_SAFE)}`, `Bearer ${ADMIN.slice(0, -1)}`]);
      if (roll === 5) headers.cookie = `antiproton_console=${wrongHex}`;
    } else if (auth.kind === "slack") {
      const secretSigned = await slackSignature(text, stale);
      const choices = [{}, { "x-slack-request-timestamp": stamp }, { "x-slack-request-timestamp": stamp, "x-slack-signature": `v0=${wrongHex}` }, { "x-slack-request-timestamp": stale, "x-slack-signature": secretSigned }, { "x-slack-request-timestamp": stamp, "x-slack-signature": await slackSignature(`${text} `, stamp) }, { "x-slack-request-timestamp": "abc", "x-slack-signature": await slackSignature(text, "abc") }];
      Object.assign(headers, choices[roll]);
    } else if (auth.kind === "antiproton") {
      const fresh = await signatureHeaders(E[auth.secret]!, text);
      const other = await signatureHeaders("not-the-secret", text);
      const choices = [{}, { ...fresh, "X-Antiproton-Signature": `v1=${wrongHex}` }, other, await signatureHeaders(E[auth.secret]!, text, (now() - 400) * 1000), await signatureHeaders(E[auth.secret]!, `${text}x`), { "X-Antiproton-Signature": fresh["X-Antiproton-Signature"]! }];
      Object.assign(headers, choices[roll]);
    } else if (auth.kind === "telegram") {
      const secret = await secretFor(TELEGRAM_TENANT);
      const choices = [{}, { "x-telegram-bot-api-secret-token": wrongHex }, { "x-telegram-bot-api-secret-token": await secretFor("tgbot2") }, { "x-telegram-bot-api-secret-token": `${secret}0` }, { "x-telegram-bot-api-secret-token": secret.toUpperCase() }, { "x-telegram-bot-api-secret-token": await secretFor(TELEGRAM_TENANT, "not-the-secret") }];
      Object.assign(headers, choices[roll]);
    } else if (auth.kind === "gchat") {
      const token = await chatToken();
      const expired = await chatToken({ iat: now() - 7200, exp: now() - 3600 });
      const choices = [{}, { authorization: `Bearer ${token.slice(0, -2)}${g.pick(["AA", "A", "-_"])}` }, { authorization: `Bearer ${expired}` }, { authorization: `Bearer ${await chatToken({ aud: "999" })}` }, { authorization: `Bearer ${await chatToken({ iss: "someone@example.com" })}` }, { authorization: `Bearer ${await chatToken({}, { kid: g.pick(HEADER_SAFE) || "x" })}` }];
      Object.assign(headers, choices[roll]);
    } else if (auth.kind === "teams") {
      const token = await teamsToken();
      const choices = [
        {},
        { authorization: `Bearer ${await teamsToken({}, "unpublished")}` },
        { authorization: `Bearer ${await teamsToken({ exp: now() - 301 - g.int(100_000) })}` },
        { authorization: `Bearer ${await teamsToken({ aud: "99999999-2222-3333-4444-555555555555" })}` },
        { authorization: `Bearer ${await teamsToken({ serviceurl: "https://smba.trafficmanager.net/amer/elsewhere/" })}` },
        { authorization: `Bearer ${token.slice(0, -2)}${token.endsWith("AA") ? "BB" : "AA"}` },
      ];
      Object.assign(headers, choices[roll]);
    } else {
      const sig = await ed25519(stamp + text);
      const choices = [{}, { "x-signature-timestamp": stamp }, { "x-signature-timestamp": stamp, "x-signature-ed25519": `${sig.slice(0, -1)}${sig.endsWith("0") ? "1" : "0"}` }, { "x-signature-timestamp": stale, "x-signature-ed25519": await ed25519(stale + text) }, { "x-signature-timestamp": stamp, "x-signature-ed25519": await ed25519(`${stamp}${text} `) }, { "x-signature-timestamp": stamp, "x-signature-ed25519": "zz".repeat(64) }];
      Object.assign(headers, choices[roll]);
    }
  }
  return { path, init: { method: route.method, headers, body: raw as BodyInit | undefined, redirect: "manual" } };
}

interface Tally {
  route: string;
  byStatus: Record<number, number>;
  failures: string[];
  /** Each request's path and status. */
  answers: { path: string; status: number }[];
}

/** `key`: send this bearer (a scoped API key) in place of ADMIN_TOKEN. */
async function fuzz(route: RouteSpec, verified: boolean, count: number, key?: string): Promise<Tally> {
  const seed = (SEED ^ hash(`${route.name}:${verified}${key ? ":key" : ""}`)) >>> 0;
  const g = new Gen(seed);
  const tally: Tally = { route: route.name, byStatus: {}, failures: [], answers: [] };
  for (let start = 0; start < count; start += PARALLEL) {
    const batch = [];
    for (let i = start; i < Math.min(count, start + PARALLEL); i++) batch.push(build(route, g, verified, key).then((req) => ({ i, req })));
    const built = await Promise.all(batch);
    await Promise.all(
      built.map(async ({ i, req }) => {
        const ctx = createExecutionContext();
        const res = await handler.fetch!(new Request(`http://antiproton.test${req.path}`, req.init) as Request<unknown, IncomingRequestCfProperties>, env, ctx);
        tally.byStatus[res.status] = (tally.byStatus[res.status] ?? 0) + 1;
        tally.answers.push({ path: req.path, status: res.status });
        const text = await res.text();
        const where = `#${i} (seed ${seed}) ${req.init.method} ${req.path}`;
        if (res.status >= 500 && tally.failures.length < 5) tally.failures.push(`${where} → ${res.status} ${text.slice(0, 200)}`);
        // Work left to finish after the answer (waitUntil) must not throw either: deployed, that is an uncaught error.
        const later = await waitOnExecutionContext(ctx).then(() => null, (err: unknown) => err);
        if (later && tally.failures.length < 5) tally.failures.push(`${where} → waitUntil threw ${String(later)}`);
      }),
    );
  }
  return tally;
}

/** What the agent objects and the control plane hold: their table names (agents) and rows (control). */
async function everythingWritten(): Promise<{ agents: string[]; control: number }> {
  const agents: string[] = [];
  for (const id of await listDurableObjectIds(env.AGENT)) {
    agents.push(...(await tablesOf(env.AGENT.get(id) as DurableObjectStub<AgentObject>)).map((table) => `${id.toString()}:${table}`));
  }
  let control = 0;
  for (const id of await listDurableObjectIds(env.CONTROL)) {
    control += await runInDurableObject(env.CONTROL.get(id), (_i, state) => state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM settings").one().n);
  }
  return { agents, control };
}

/**
 * Routes whose verified fuzz finds 5xx that another branch fixes: the test is
 * marked as failing, so it turns red (and the mark must go) once the fix lands.
 */

describe(`fuzz of every route, seed ${SEED}: requests that fail verification`, () => {
  for (const route of ROUTES) {
    const count = route.auth.kind === "public" ? PER_ROUTE : PER_ROUTE / 2;
    it(`${route.name}: ${count} requests, never 5xx, nothing thrown later${route.auth.kind === "public" ? "" : ", all refused"}`, async () => {
      const tally = await fuzz(route, false, count);
      expect(tally.failures).toEqual([]);
      // A console page sends the unsigned-in to sign in (303); anything else is a 4xx.
      if (route.auth.kind !== "public") expect(Object.keys(tally.byStatus).map(Number).every((s) => s >= 300 && s < 500), JSON.stringify(tally.byStatus)).toBe(true);
    });
  }

  it("none of them wrote anything: no agent object has a table, the control plane has no row", async () => {
    expect(await everythingWritten()).toEqual({ agents: [], control: 0 });
  });
});

describe(`fuzz of every route, seed ${SEED}: verified requests with mutated content`, () => {
  // The fuzz is about what the routes answer and write. The turns its accepted
  // requests start would run for minutes behind it (model calls, chat sends):
  // their effects go to a sink instead of their couriers (and the queue) while it runs.
  const target = env as unknown as Record<string, unknown>;
  const [queue, couriers] = [target.EFFECT_QUEUE, target.COURIER];
  beforeAll(() => {
    target.EFFECT_QUEUE = { send: async () => undefined, sendBatch: async () => undefined };
    target.COURIER = { idFromName: (name: string) => name, get: () => ({ take: async () => undefined }) };
  });
  afterAll(() => void Object.assign(target, { EFFECT_QUEUE: queue, COURIER: couriers }));

  it("(the webhook tenant the events name has somewhere to send replies)", async () => {
    const registered = await handler.fetch!(
      new Request(`http://antiproton.test/v1/webhook/tenants/${WEBHOOK_TENANT}`, {
        method: "PUT",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
        body: JSON.stringify({ callback_url: `${E.FAKE_CALLBACK_URL}/hooks/${WEBHOOK_TENANT}` }),
      }) as Request<unknown, IncomingRequestCfProperties>,
      env,
      createExecutionContext(),
    );
    expect(registered.status).toBe(200);
  });

  // Tenant "fuzz" holds a scoped key; every other tenant a path names is another's, and must stay out of its reach.
  describe("with tenant fuzz's API key in place of ADMIN_TOKEN", () => {
    let key = "";
    beforeAll(async () => {
      const made = await handler.fetch!(
        new Request("http://antiproton.test/v1/tenants/fuzz/keys", { method: "POST", headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" }, body: JSON.stringify({ name: "fuzz", access: "admin" }) }) as Request<unknown, IncomingRequestCfProperties>,
        env,
        createExecutionContext(),
      );
      key = ((await made.json()) as { key: string }).key;
    });
    const tenantIn = (path: string) => /\/tenants\/([^/?]*)/.exec(path)?.[1];
    for (const route of ROUTES.filter((r) => r.auth.kind === "bearer" && r.name.includes(" /v1/"))) {
      it(`${route.name}: ${PER_ROUTE / 4} requests; another tenant's paths are all 404, some of fuzz's accepted`, async () => {
        const tally = await fuzz(route, true, PER_ROUTE / 4, key);
        expect(tally.failures).toEqual([]);
        const foreign = tally.answers.filter((a) => tenantIn(a.path) !== "fuzz");
        expect(foreign.length).toBeGreaterThan(0);
        expect(foreign.filter((a) => a.status !== 404)).toEqual([]);
        expect(tally.answers.some((a) => tenantIn(a.path) === "fuzz" && a.status < 400), JSON.stringify(tally.byStatus)).toBe(true);
      });
    }
  });

  for (const route of ROUTES.filter((r) => r.auth.kind !== "public")) {
    it(`${route.name}: ${PER_ROUTE / 2} requests, never 5xx, nothing thrown later, some accepted`, async () => {
      const tally = await fuzz(route, true, PER_ROUTE / 2);
      expect(tally.failures).toEqual([]);
      // The fuzz is only as good as its signatures: some requests got through to the handler.
      expect(Object.keys(tally.byStatus).some((s) => Number(s) < 400), JSON.stringify(tally.byStatus)).toBe(true);
    });
  }
});
