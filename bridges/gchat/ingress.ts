// Google Chat events into ChatEvents. Every request is verified first
// (verify.ts). Chat sends an HTTP app's events in one of two forms: the Chat
// API's interaction event ({type: MESSAGE | ADDED_TO_SPACE | ...}) or, for
// an app built as a Workspace add-on, {commonEventObject, chat: {<kind>Payload}};
// both are read into one shape here and answered in the form they came in.
// A message's name is its event id (a click's: the card's message, the
// person and the event time), so a delivery Chat retries is one event. A DM
// is a conversation; in a space each thread is one, and the app hears only
// what mentions it (Chat sends no more) and its slash commands. /stop,
// /compact and /status are commands; a card's button a decision. Answers that
// need no message of ours to be found again (a command's notice, a click's
// acknowledgement) ride on the request's own answer.
import type { Context } from "hono";
import * as z from "zod";
import { parseDecisionValue } from "../../approvals/index.ts";
import { HttpError, parseJson } from "../../lib/http.ts";
import { clip } from "../../lib/text.ts";
import { type ChatCommand, type ChatUser, parseRoute, rememberPerson, type Route, submitEvent } from "../../runtime/index.ts";
import { conversationId, textId } from "../shared/ids.ts";
import { conversationOf, gchatAddress, messageName, spaceName, threadName, userIdOf, type GchatTarget } from "./address.ts";
import { DECISION_PARAMETER, GCHAT_MESSAGE_LIMIT } from "./card.ts";
import { agentName, defaultTenant } from "./config.ts";
import { readEvent } from "./verify.ts";

const userSchema = z.looseObject({
  name: z.string().regex(/^users\/[A-Za-z0-9_.@-]{1,100}$/, "a user's name (users/<id>)"),
  displayName: z.string().optional(),
  type: z.enum(["HUMAN", "BOT", "TYPE_UNSPECIFIED"]).optional(),
  domainId: textId(100).optional(),
});
type GchatUser = z.infer<typeof userSchema>;

const spaceSchema = z.looseObject({
  name: spaceName,
  type: z.string().optional(),
  spaceType: z.string().optional(),
  singleUserBotDm: z.boolean().optional(),
  /** customers/<id>: the Workspace customer the space belongs to, where Chat says. */
  customer: z.string().regex(/^customers\/[A-Za-z0-9_-]{1,100}$/).optional(),
});

const annotationSchema = z.looseObject({
  type: z.string(),
  startIndex: z.number().int().nonnegative().optional(),
  length: z.number().int().nonnegative().optional(),
  userMention: z.looseObject({ user: z.looseObject({ name: z.string(), type: z.string().optional() }) }).optional(),
  slashCommand: z.looseObject({ commandName: z.string().optional(), commandId: z.union([z.string(), z.number()]).optional() }).optional(),
});

const messageSchema = z.looseObject({
  name: messageName,
  sender: userSchema.optional(),
  text: z.string().optional(),
  argumentText: z.string().optional(),
  annotations: z.array(annotationSchema).optional(),
  slashCommand: z.looseObject({ commandId: z.union([z.string(), z.number()]) }).optional(),
  thread: z.looseObject({ name: threadName }).optional(),
});
type GchatMessage = z.infer<typeof messageSchema>;

const parametersSchema = z.record(z.string(), z.string());

/** The Chat API's interaction event. */
const chatEventSchema = z.looseObject({
  type: z.string(),
  eventTime: z.string().min(1).max(64),
  space: spaceSchema,
  user: userSchema,
  message: messageSchema.optional(),
  action: z.looseObject({ actionMethodName: z.string().optional(), parameters: z.array(z.looseObject({ key: z.string(), value: z.string() })).optional() }).optional(),
  common: z.looseObject({ parameters: parametersSchema.optional() }).optional(),
});

/** A Workspace add-on's event. */
const payload = z.looseObject({ space: spaceSchema, message: messageSchema.optional() });
const addOnEventSchema = z.looseObject({
  commonEventObject: z.looseObject({ parameters: parametersSchema.optional() }).optional(),
  chat: z.looseObject({
    user: userSchema,
    eventTime: z.string().min(1).max(64),
    messagePayload: payload.optional(),
    buttonClickedPayload: payload.optional(),
    addedToSpacePayload: payload.optional(),
    removedFromSpacePayload: payload.optional(),
    appCommandPayload: payload.optional(),
  }),
});

type Form = "chat" | "addon";
type Kind = "MESSAGE" | "ADDED_TO_SPACE" | "REMOVED_FROM_SPACE" | "CARD_CLICKED" | "APP_COMMAND" | "OTHER";

/** Either form, read alike. */
interface GchatEvent {
  form: Form;
  kind: Kind;
  eventTime: string;
  user: GchatUser;
  space: z.infer<typeof spaceSchema>;
  message?: GchatMessage;
  parameters: Record<string, string>;
}

const KINDS: Kind[] = ["MESSAGE", "ADDED_TO_SPACE", "REMOVED_FROM_SPACE", "CARD_CLICKED", "APP_COMMAND"];
const ADD_ON_PAYLOADS = [
  ["messagePayload", "MESSAGE"],
  ["buttonClickedPayload", "CARD_CLICKED"],
  ["addedToSpacePayload", "ADDED_TO_SPACE"],
  ["removedFromSpacePayload", "REMOVED_FROM_SPACE"],
  ["appCommandPayload", "APP_COMMAND"],
] as const;

/** The event, or null for one of a kind the bridge does not read (an add-on event with no payload it knows). */
function readForm(body: unknown): GchatEvent | null {
  if (typeof body === "object" && body !== null && "chat" in body) {
    const parsed = addOnEventSchema.safeParse(body);
    if (!parsed.success) throw new HttpError(400, `not a Google Chat event: ${z.prettifyError(parsed.error)}`);
    const { chat, commonEventObject } = parsed.data;
    const found = ADD_ON_PAYLOADS.find(([key]) => chat[key] !== undefined);
    if (!found) return null;
    const { space, message } = chat[found[0]]!;
    return { form: "addon", kind: found[1], eventTime: chat.eventTime, user: chat.user, space, ...(message ? { message } : {}), parameters: commonEventObject?.parameters ?? {} };
  }
  const parsed = chatEventSchema.safeParse(body);
  if (!parsed.success) throw new HttpError(400, `not a Google Chat event: ${z.prettifyError(parsed.error)}`);
  const e = parsed.data;
  const parameters = { ...Object.fromEntries((e.action?.parameters ?? []).map((p) => [p.key, p.value])), ...e.common?.parameters };
  const kind = KINDS.find((k) => k === e.type) ?? "OTHER";
  return { form: "chat", kind, eventTime: e.eventTime, user: e.user, space: e.space, ...(e.message ? { message: e.message } : {}), parameters };
}

/** A message the app sends back as the request's answer, in the form the event came in. */
function answerMessage(c: Context, event: GchatEvent, text: string, privately = false) {
  const message = { text: clip(text, GCHAT_MESSAGE_LIMIT), ...(privately ? { privateMessageViewer: { name: event.user.name } } : {}) };
  if (event.form === "addon") return c.json({ hostAppDataAction: { chatDataAction: { createMessageAction: { message } } } });
  return c.json(event.kind === "CARD_CLICKED" ? { actionResponse: { type: "NEW_MESSAGE" }, ...message } : message);
}

const COMMANDS = new Map<string, ChatCommand>([["stop", "stop"], ["compact", "compact"], ["status", "status"]]);

/** The Workspace customer's tenant (the space's customer, else the person's domain); the default for neither. */
function tenantOf(env: Env, event: GchatEvent): string {
  const customer = event.space.customer?.slice("customers/".length) ?? event.user.domainId;
  return customer ? `gchat-${customer}` : defaultTenant(env);
}

const isDirect = (space: GchatEvent["space"]) => space.type === "DM" || space.spaceType === "DIRECT_MESSAGE" || space.singleUserBotDm === true;

/** The space, and outside a DM the thread, a message or a click came from. */
function placeOf(event: GchatEvent): GchatTarget {
  const direct = isDirect(event.space);
  const thread = direct ? undefined : event.message?.thread?.name;
  return { space: event.space.name, ...(thread ? { thread } : {}), direct };
}

const chatUser = (user: GchatUser): ChatUser => ({ platform: "gchat", id: userIdOf(user.name), ...(user.displayName ? { name: user.displayName } : {}) });

/** The name goes to the people directory (the console and the trail show it for gchat:<tenant>:<user>), after the answer. */
function rememberName(c: Context<{ Bindings: Env }>, route: Route, user: GchatUser): void {
  if (!user.displayName) return;
  c.executionCtx.waitUntil(rememberPerson(c.env, { identity: `gchat:${route.tenant}:${userIdOf(user.name)}`, name: user.displayName }).catch(() => undefined));
}

/** The slash command a message carries ("/stop"), by the name Chat annotates it with, else (an invoked command) its text. */
function commandOf(event: GchatEvent, message: GchatMessage): string | null {
  const annotated = message.annotations?.find((a) => a.type === "SLASH_COMMAND")?.slashCommand?.commandName;
  const invoked = message.slashCommand !== undefined || event.kind === "APP_COMMAND";
  const name = annotated ?? (invoked ? message.text?.trim().split(/\s+/)[0] : undefined);
  return name?.startsWith("/") ? name.slice(1).toLowerCase() : null;
}

const appMentions = (message: GchatMessage) => (message.annotations ?? []).filter((a) => a.type === "USER_MENTION" && a.userMention?.user.type === "BOT");

/** What the person said to the app: argumentText (the text without the app's mention), else the text without mentions of apps. */
function saidTo(message: GchatMessage): string {
  if (message.argumentText !== undefined) return message.argumentText.trim();
  let text = message.text ?? "";
  const spans = appMentions(message).flatMap((a) => (a.startIndex !== undefined && a.length !== undefined ? [[a.startIndex, a.length] as const] : []));
  for (const [start, length] of spans.sort((a, b) => b[0] - a[0])) text = text.slice(0, start) + text.slice(start + length);
  return text.trim();
}

export async function handleEvent(c: Context<{ Bindings: Env }>): Promise<Response> {
  const raw = await readEvent(c);
  const event = readForm(parseJson(raw));
  if (!event) return c.json({});
  const route = parseRoute(tenantOf(c.env, event), agentName(c.env));
  switch (event.kind) {
    case "MESSAGE":
    case "APP_COMMAND":
      return onMessage(c, route, event);
    case "ADDED_TO_SPACE":
      // Added with a message that mentions the app: that message is heard.
      if (event.message) return onMessage(c, route, event);
      return answerMessage(c, event, "Hello! Mention me in a thread, or message me directly, and the agent answers there. /stop ends its turn.");
    case "CARD_CLICKED":
      return onClick(c, route, event);
    default:
      // Removed from a space (nothing can be posted there now) and kinds the bridge does not handle.
      return c.json({});
  }
}

async function onMessage(c: Context<{ Bindings: Env }>, route: Route, event: GchatEvent): Promise<Response> {
  const { message } = event;
  // The agent never answers an app (itself included).
  if (!message || event.user.type === "BOT" || message.sender?.type === "BOT") return c.json({});
  const place = placeOf(event);
  const command = commandOf(event, message);
  if (!place.direct && command === null && appMentions(message).length === 0) return c.json({});
  rememberName(c, route, event.user);
  const base = {
    id: `gchat:message:${message.name}`,
    conversation: conversationId(conversationOf(place), "the space and thread"),
    user: chatUser(event.user),
    replyTo: gchatAddress(place),
  };
  if (command !== null) {
    const chatCommand = COMMANDS.get(command);
    if (!chatCommand) return answerMessage(c, event, `/${command} is not a command of this app: /stop, /compact and /status are.`, true);
    const result = await submitEvent(c.env, route, { ...base, kind: "command", command: chatCommand });
    return result.accepted && result.notice ? answerMessage(c, event, result.notice) : c.json({});
  }
  const said = saidTo(message);
  if (said === "") return c.json({});
  await submitEvent(c.env, route, { ...base, kind: "message", text: said });
  return c.json({});
}

/** A click on a card's button: a decision; the clicker is told privately, the card updated for everyone through the outbox. */
async function onClick(c: Context<{ Bindings: Env }>, route: Route, event: GchatEvent): Promise<Response> {
  const decision = parseDecisionValue(event.parameters[DECISION_PARAMETER] ?? "");
  if (!decision || !event.message) return c.json({});
  rememberName(c, route, event.user);
  const result = await submitEvent(c.env, route, {
    id: `gchat:click:${event.message.name}:${userIdOf(event.user.name)}:${event.eventTime}`,
    conversation: conversationId(conversationOf(placeOf(event)), "the space and thread"),
    user: chatUser(event.user),
    kind: "decision",
    holdId: decision.holdId,
    approve: decision.approve,
    boundTo: { tenant: decision.tenant, agent: decision.agent },
  });
  if (result.decided) return answerMessage(c, event, decision.approve ? "Approved." : "Denied.", true);
  return answerMessage(c, event, result.notice ?? "Already received.", true);
}
