// Bot Framework activities into ChatEvents. POST /teams/api/messages (the
// bot's messaging endpoint) is verified first (verify.ts). The tenant is the
// Microsoft Entra tenant the activity comes from; the conversation is the
// Teams conversation (a channel's thread, a group chat, a 1:1 chat), whose id
// with the activity's makes the event id, so a delivery retried is one event.
// In a 1:1 chat every message is for the agent; in a group chat or a channel
// those that @mention the bot, and in a channel every reply in a thread the
// agent already answers. "stop", "compact" and "status" are commands. A
// card's Action.Execute (an adaptiveCard/action invoke) or Action.Submit (a
// message carrying its data) is a decision. Install and uninstall
// (installationUpdate, conversationUpdate) are acknowledged; an uninstall
// stops the conversation's running turn, since nothing can be posted there.
import type { Context } from "hono";
import * as z from "zod";
import { HttpError, parseJson } from "../../lib/http.ts";
import { parseDecisionValue } from "../../approvals/index.ts";
import { agentStub, type ChatCommand, type ChatUser, parseRoute, rememberPerson, type Route, submitEvent } from "../../runtime/index.ts";
import { activitiesPath, conversationOf, teamsAddress, type TeamsTarget } from "./address.ts";
import { actionDataSchema, adaptiveCard, ADAPTIVE_CARD } from "./card.ts";
import { agentName } from "./config.ts";
import { callConnector } from "./connector.ts";
import { readActivity } from "./verify.ts";

const accountSchema = z.looseObject({ id: z.string().min(1).max(500), name: z.string().optional(), aadObjectId: z.string().optional() });
type Account = z.infer<typeof accountSchema>;

const activitySchema = z.looseObject({
  type: z.string().min(1),
  id: z.string().min(1).max(500).optional(),
  channelId: z.string().min(1),
  serviceUrl: z.url(),
  from: accountSchema,
  recipient: accountSchema,
  conversation: z.looseObject({
    id: z.string().min(1).max(1000),
    conversationType: z.string().optional(),
    isGroup: z.boolean().optional(),
    tenantId: z.string().optional(),
  }),
  text: z.string().optional(),
  entities: z.array(z.looseObject({ type: z.string(), mentioned: accountSchema.optional(), text: z.string().optional() })).optional(),
  channelData: z.looseObject({ tenant: z.looseObject({ id: z.string() }).optional() }).optional(),
  name: z.string().optional(),
  value: z.unknown().optional(),
  action: z.string().optional(),
  membersAdded: z.array(accountSchema).optional(),
  membersRemoved: z.array(accountSchema).optional(),
});
type Activity = z.infer<typeof activitySchema>;

const invokeValueSchema = z.looseObject({ action: z.looseObject({ type: z.string(), data: actionDataSchema }) });

const COMMANDS = new Map<string, ChatCommand>([["stop", "stop"], ["compact", "compact"], ["status", "status"]]);

type Ctx = Context<{ Bindings: Env }>;

interface Place {
  route: Route;
  conversation: string;
  target: TeamsTarget;
  kind: "personal" | "groupChat" | "channel";
}

/** Teams names the kind of conversation; the recorded activities of a channel do not always, but a channel's id says so. */
function kindOf(activity: Activity): Place["kind"] {
  const { conversationType, isGroup, id } = activity.conversation;
  if (conversationType === "personal" || conversationType === "groupChat" || conversationType === "channel") return conversationType;
  if (!isGroup) return "personal";
  return /@thread\.(tacv2|skype)/.test(id) ? "channel" : "groupChat";
}

async function placeOf(env: Env, activity: Activity): Promise<Place> {
  const tenantId = activity.conversation.tenantId ?? activity.channelData?.tenant?.id;
  if (!tenantId) throw new HttpError(400, "the activity names no Microsoft Entra tenant");
  const kind = kindOf(activity);
  return {
    route: parseRoute(tenantId, agentName(env)),
    conversation: await conversationOf(activity.conversation.id),
    target: { serviceUrl: activity.serviceUrl, conversationId: activity.conversation.id, direct: kind === "personal" },
    kind,
  };
}

/** The person: their Entra object id where Teams gives it (one id in every chat), else their Teams id. */
const chatUser = (from: Account): ChatUser => ({ platform: "teams", id: from.aadObjectId ?? from.id, ...(from.name ? { name: from.name } : {}) });

/** The name goes to the people directory (the console and the trail show it for teams:<tenant>:<person>), after the answer. */
function rememberName(c: Ctx, route: Route, from: Account): void {
  if (!from.name) return;
  c.executionCtx.waitUntil(rememberPerson(c.env, { identity: `teams:${route.tenant}:${chatUser(from).id}`, name: from.name }).catch(() => undefined));
}

export async function handleActivity(c: Ctx): Promise<Response> {
  const { raw, check } = await readActivity(c);
  const parsed = activitySchema.safeParse(parseJson(raw));
  if (!parsed.success) throw new HttpError(400, `not a Bot Framework activity: ${z.prettifyError(parsed.error)}`);
  const activity = parsed.data;
  check(activity);
  switch (activity.type) {
    case "message":
      return onMessage(c, activity);
    case "invoke":
      return onInvoke(c, activity);
    case "installationUpdate":
    case "conversationUpdate":
      return onMembership(c, activity);
    default:
      // Reactions, typing, edits, deletions: nothing the agent acts on.
      return c.json({ ignored: "an activity of a kind the bridge does not handle" });
  }
}

const mentionsBot = (activity: Activity) => (activity.entities ?? []).some((e) => e.type === "mention" && e.mentioned?.id === activity.recipient.id);

/** "<at>Bot</at> do this" reads "do this"; another person's mention reads "@Name". */
function spokenText(activity: Activity): string {
  const botMentions = new Set((activity.entities ?? []).filter((e) => e.type === "mention" && e.mentioned?.id === activity.recipient.id).map((e) => e.text ?? `<at>${e.mentioned?.name}</at>`));
  let text = activity.text ?? "";
  for (const mention of botMentions) text = text.replaceAll(mention, "");
  return text.replace(/<at>([^<]*)<\/at>/g, "@$1").replace(/&nbsp;/g, " ").trim();
}

/** In a channel, is this a reply in a thread the agent already answers? The listing, not the conversation itself: it carries no transcript. */
async function knownThread(env: Env, place: Place): Promise<boolean> {
  return (await agentStub(env, place.route).conversations(place.route, place.conversation)).some((c) => c.id === place.conversation);
}

async function onMessage(c: Ctx, activity: Activity): Promise<Response> {
  if (activity.from.id === activity.recipient.id) return c.json({ ignored: "the bot's own message" });
  const submitted = actionDataSchema.safeParse(activity.value);
  if (submitted.success) return decide(c, activity, submitted.data.holdDecision, false);
  if (activity.value !== undefined) return c.json({ ignored: "a card's data the bridge did not make" });
  const place = await placeOf(c.env, activity);
  if (place.kind !== "personal" && !mentionsBot(activity) && !(place.kind === "channel" && (await knownThread(c.env, place)))) {
    return c.json({ ignored: "not addressed to the bot" });
  }
  const text = spokenText(activity);
  if (text === "") return c.json({ ignored: "no text" });
  if (!activity.id) throw new HttpError(400, "a message activity without an id");
  rememberName(c, place.route, activity.from);
  const base = {
    id: `teams:${place.conversation}:${activity.id}`,
    conversation: place.conversation,
    user: chatUser(activity.from),
    replyTo: teamsAddress(place.target),
  };
  const command = COMMANDS.get(text.replace(/^\//, "").toLowerCase());
  if (command) {
    const result = await submitEvent(c.env, place.route, { ...base, kind: "command", command });
    // The notice needs no message of ours to be found again: posted once, after the answer.
    if (result.accepted && result.notice) {
      const notice = { type: "message", textFormat: "markdown", text: result.notice, replyToId: activity.id };
      c.executionCtx.waitUntil(callConnector(c.env, place.target.serviceUrl, "POST", activitiesPath(place.target.conversationId), notice).catch(() => undefined));
    }
    return c.json({ accepted: result.accepted });
  }
  return c.json(await submitEvent(c.env, place.route, { ...base, kind: "message", text }));
}

/** An adaptiveCard/action invoke: a card's Action.Execute, answered with the card as it now stands (or why not). */
async function onInvoke(c: Ctx, activity: Activity): Promise<Response> {
  const value = invokeValueSchema.safeParse(activity.value);
  // Other invokes (sign-in, message extensions): the app declares none, so none is acted on.
  if (activity.name !== "adaptiveCard/action" || !value.success) return c.json({ ignored: "an invoke the bridge does not handle" });
  return decide(c, activity, value.data.action.data.holdDecision, true);
}

async function decide(c: Ctx, activity: Activity, holdDecision: string, invoked: boolean): Promise<Response> {
  const message = (text: string) => c.json({ statusCode: 200, type: "application/vnd.microsoft.activity.message", value: text });
  const decision = parseDecisionValue(holdDecision);
  // Not a card's button: acknowledged, nothing done.
  if (!decision) return invoked ? message("Nothing to do.") : c.json({ ignored: "not a card's decision" });
  if (!activity.id) throw new HttpError(400, "a click without an activity id");
  const place = await placeOf(c.env, activity);
  rememberName(c, place.route, activity.from);
  const result = await submitEvent(c.env, place.route, {
    id: `teams:${place.conversation}:${activity.id}`,
    conversation: place.conversation,
    user: chatUser(activity.from),
    kind: "decision",
    holdId: decision.holdId,
    approve: decision.approve,
    boundTo: { tenant: decision.tenant, agent: decision.agent },
  });
  if (!invoked) return c.json({ decided: result.decided === true });
  // The deciding click's card is replaced at once by the card naming who decided (the outbox updates it for everyone too).
  if (result.decided && result.card) return c.json({ statusCode: 200, type: ADAPTIVE_CARD, value: adaptiveCard(result.card) });
  return message(result.notice ?? "Already decided.");
}

/** The bot added or removed: acknowledged; removed, the conversation's running turn is stopped (nothing more could be posted there). */
async function onMembership(c: Ctx, activity: Activity): Promise<Response> {
  const removed = activity.action === "remove" || (activity.membersRemoved ?? []).some((m) => m.id === activity.recipient.id);
  if (!removed || !activity.id) return c.json({ ok: true });
  const place = await placeOf(c.env, activity);
  if (!(await knownThread(c.env, place))) return c.json({ ok: true });
  const result = await submitEvent(c.env, place.route, {
    id: `teams:${place.conversation}:${activity.id}`,
    conversation: place.conversation,
    user: chatUser(activity.from),
    kind: "command",
    command: "stop",
  });
  return c.json({ accepted: result.accepted });
}
