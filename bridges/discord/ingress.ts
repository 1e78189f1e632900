// Discord into ChatEvents. Interactions (slash commands, button clicks) come
// from Discord; channel messages come from the gateway connector (gateway.mjs)
// as Discord's own message object. Both are verified first (verify.ts); every
// id is checked as a snowflake before it names an object, a conversation or a
// REST path. Routing: tenant = the guild (a DM: `dm-<user id>`), conversation =
// the channel (a thread is its own channel), agent = DISCORD_AGENT.
import type {
  APIInteractionResponse,
  APIInteractionResponseChannelMessageWithSource,
  InteractionResponseType,
  InteractionType,
  MessageFlags,
} from "discord-api-types/v10";
import type { Context } from "hono";
import * as z from "zod";
import { parseDecisionValue } from "../../approvals/index.ts";
import { HttpError, parseJson } from "../../lib/http.ts";
import { fetchFiles, parseRoute, rememberPerson, submitEvent, trustedUrl, type ChatCommand, type ChatUser, type Route } from "../../runtime/index.ts";
import { conversationId } from "../shared/ids.ts";
import { discordAddress, interactionToken, snowflake } from "./address.ts";
import { cardMessage } from "./card.ts";
import { agentName, apiBaseUrl, applicationId } from "./config.ts";
import { readGatewayBody, readInteractionBody } from "./verify.ts";


// Discord's numbers, each typed as its discord-api-types enum member, so a wrong
// one does not compile (the package is imported for types only: nothing is bundled).
const PING: InteractionType.Ping = 1;
const APPLICATION_COMMAND: InteractionType.ApplicationCommand = 2;
const MESSAGE_COMPONENT: InteractionType.MessageComponent = 3;
const PONG: InteractionResponseType.Pong = 1;
const CHANNEL_MESSAGE: InteractionResponseType.ChannelMessageWithSource = 4;
const DEFERRED_CHANNEL_MESSAGE: InteractionResponseType.DeferredChannelMessageWithSource = 5;
/** Acknowledges a click and changes nothing the person sees. */
const DEFERRED_UPDATE: InteractionResponseType.DeferredMessageUpdate = 6;
const UPDATE_MESSAGE: InteractionResponseType.UpdateMessage = 7;
const EPHEMERAL: MessageFlags.Ephemeral = 64;

const userSchema = z.object({ id: snowflake, username: z.string().optional(), global_name: z.string().nullish() });
type DiscordUser = z.infer<typeof userSchema>;

function discordRoute(env: Env, guildId: string | undefined | null, user: DiscordUser): Route {
  return parseRoute(guildId ? guildId : `dm-${user.id}`, agentName(env));
}

const chatUser = (user: DiscordUser): ChatUser => ({ platform: "discord", id: user.id, name: user.global_name ?? user.username });

/**
 * The name a payload carries goes to the people directory (the console shows
 * it for `discord:<guild>:<user>`), after the answer: Discord waits 3 s for an
 * interaction's. A name not kept is shown as the id until a later payload keeps it.
 */
function rememberName(c: Context<{ Bindings: Env }>, route: Route, user: DiscordUser): void {
  const name = user.global_name ?? user.username;
  if (name) c.executionCtx.waitUntil(rememberPerson(c.env, { identity: `discord:${route.tenant}:${user.id}`, name }).catch(() => undefined));
}

/** A channel is a conversation (a snowflake always makes one; the rule is checked anyway). */
const channelConversation = (channelId: string) => conversationId(channelId, "the channel id");

// ---- gateway messages (POST /discord/gateway-events) ------------------------------

const gatewayMessageSchema = z.object({
  id: snowflake,
  channel_id: snowflake,
  guild_id: snowflake.nullish(),
  content: z.string(),
  webhook_id: snowflake.nullish(),
  author: userSchema.extend({ bot: z.boolean().optional() }),
  attachments: z
    .array(z.looseObject({ filename: z.string(), size: z.number().int().nonnegative(), url: z.string(), content_type: z.string().nullish() }))
    .default([]),
});

/** Where Discord serves a message's attachments (signed links: no token goes with them). */
const ATTACHMENT_HOSTS = ["cdn.discordapp.com", "media.discordapp.net"];

export async function handleGatewayMessage(c: Context<{ Bindings: Env }>): Promise<Response> {
  const parsed = gatewayMessageSchema.safeParse(parseJson(await readGatewayBody(c)));
  if (!parsed.success) throw new HttpError(400, `not a Discord message: ${z.prettifyError(parsed.error)}`);
  const message = parsed.data;
  // The agent never answers a bot, itself included, nor a webhook's post.
  if (message.author.bot || message.webhook_id) return c.json({ ignored: "the author is a bot" });
  const text = withoutBotMention(message.content, applicationId(c.env)).trim();
  if (text === "" && message.attachments.length === 0) return c.json({ ignored: "no text" });

  const route = discordRoute(c.env, message.guild_id, message.author);
  rememberName(c, route, message.author);
  const files = message.attachments.map((file) => ({
    name: file.filename,
    mimeType: file.content_type?.split(";")[0]?.trim() || "application/octet-stream",
    bytes: file.size,
    url: trustedUrl(file.url, ATTACHMENT_HOSTS, apiBaseUrl(c.env)),
  }));
  const attachments = files.length > 0 ? await fetchFiles(files, { platform: "Discord" }) : [];
  const result = await submitEvent(c.env, route, {
    // The message id: a message forwarded twice (a connector retry, two connectors) is one event.
    id: `discord:message:${message.id}`,
    kind: "message",
    conversation: channelConversation(message.channel_id),
    user: chatUser(message.author),
    text,
    ...(attachments.length > 0 ? { attachments } : {}),
    replyTo: discordAddress({ channelId: message.channel_id }),
  });
  return c.json(result, result.accepted ? 202 : 200);
}

/** "<@bot> do this" reads as "do this" to the agent. */
function withoutBotMention(content: string, botId: string | undefined): string {
  return botId && /^\d+$/.test(botId) ? content.replace(new RegExp(`<@!?${botId}>`, "g"), "") : content;
}

// ---- interactions (POST /discord/interactions) ------------------------------------

const pingSchema = z.object({ type: z.literal(PING) });

const interactionSchema = z.object({
  id: snowflake,
  type: z.number().int(),
  application_id: snowflake,
  token: interactionToken,
  guild_id: snowflake.optional(),
  channel_id: snowflake.optional(),
  channel: z.object({ id: snowflake }).optional(),
  member: z.object({ user: userSchema }).optional(),
  user: userSchema.optional(),
  data: z
    .object({
      name: z.string().optional(),
      custom_id: z.string().optional(),
      options: z.array(z.object({ name: z.string(), value: z.unknown().optional() })).optional(),
    })
    .optional(),
});
type Interaction = z.infer<typeof interactionSchema>;

const COMMANDS = new Map<string, ChatCommand>([["stop", "stop"], ["compact", "compact"], ["status", "status"]]);

export async function handleInteraction(c: Context<{ Bindings: Env }>): Promise<Response> {
  const body = parseJson(await readInteractionBody(c));
  if (pingSchema.safeParse(body).success) return c.json({ type: PONG } satisfies APIInteractionResponse);
  const parsed = interactionSchema.safeParse(body);
  if (!parsed.success) throw new HttpError(400, `not an interaction: ${z.prettifyError(parsed.error)}`);
  const interaction = parsed.data;
  const user = interaction.member?.user ?? interaction.user;
  if (user) rememberName(c, discordRoute(c.env, interaction.guild_id, user), user);
  switch (interaction.type) {
    case APPLICATION_COMMAND:
      return c.json(await command(c.env, interaction));
    case MESSAGE_COMPONENT:
      return c.json(await component(c.env, interaction));
    default:
      throw new HttpError(400, `interaction type ${interaction.type} is not supported`);
  }
}

function origin(interaction: Interaction) {
  const user = interaction.member?.user ?? interaction.user;
  if (!user) throw new HttpError(400, "interaction has no user");
  const channelId = interaction.channel_id ?? interaction.channel?.id;
  if (!channelId) throw new HttpError(400, "interaction has no channel");
  return { user, channelId, conversation: channelConversation(channelId) };
}

/** A message only the person who interacted sees. */
function privately(content: string): APIInteractionResponseChannelMessageWithSource {
  return { type: CHANNEL_MESSAGE, data: { content, allowed_mentions: { parse: [] }, flags: EPHEMERAL } };
}

async function command(env: Env, interaction: Interaction): Promise<APIInteractionResponse> {
  const { user, channelId, conversation } = origin(interaction);
  const route = discordRoute(env, interaction.guild_id, user);
  const name = interaction.data?.name ?? "";
  const base = { id: `discord:interaction:${interaction.id}`, conversation, user: chatUser(user) };

  if (name === "ask") {
    const text = interaction.data?.options?.find((o) => o.name === "text")?.value;
    if (typeof text !== "string" || text.trim() === "") return privately("Usage: /ask text");
    const replyTo = discordAddress({ channelId, applicationId: interaction.application_id, interactionToken: interaction.token, interactionIssuedAt: Date.now() });
    const result = await submitEvent(env, route, { ...base, kind: "message", text, replyTo });
    if (!result.accepted) return privately("Already received.");
    // The reply comes later through the interaction webhook (or the channel past its 15 minutes).
    return { type: DEFERRED_CHANNEL_MESSAGE };
  }
  const chatCommand = COMMANDS.get(name);
  if (!chatCommand) return privately(`Unknown command /${name}.`);
  const result = await submitEvent(env, route, { ...base, kind: "command", command: chatCommand });
  // Private, as Slack's are: status names mounts and errors meant for the person asking.
  return privately(result.notice ?? "Already received.");
}

async function component(env: Env, interaction: Interaction): Promise<APIInteractionResponse> {
  const { user, conversation } = origin(interaction);
  // An approval card's buttons carry its decision value (bound to a tenant and agent) as custom_id.
  const decision = parseDecisionValue(interaction.data?.custom_id ?? "");
  // Another app's button on a message we can see: acknowledged, and nothing shown or done.
  if (!decision) return { type: DEFERRED_UPDATE };
  const route = discordRoute(env, interaction.guild_id, user);
  const result = await submitEvent(env, route, {
    id: `discord:interaction:${interaction.id}`,
    conversation,
    user: chatUser(user),
    kind: "decision",
    holdId: decision.holdId,
    approve: decision.approve,
    boundTo: { tenant: decision.tenant, agent: decision.agent },
  });
  // The deciding click sees the card replaced at once; every other click is told privately
  // (the card itself is updated for everyone through the outbox).
  if (result.decided && result.card) {
    return { type: UPDATE_MESSAGE, data: { ...cardMessage(result.card), allowed_mentions: { parse: [] } } };
  }
  return privately(result.notice ?? "Already received.");
}
