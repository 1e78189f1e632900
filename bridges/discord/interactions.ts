// POST /discord/interactions: slash commands and button clicks, verified with
// Ed25519 before anything else (Discord probes this with bad signatures).
import { verifyKey } from "discord-interactions";
import { parseDecisionValue } from "../../approvals/index.ts";
import type { Context } from "hono";
import { z } from "zod";
import { secretNamed } from "../../lib/config.ts";
import { HttpError, parseJson, readBody } from "../../lib/http.ts";
import { submitEvent, type ChatCommand } from "../../runtime/index.ts";
import { isFreshTimestamp } from "../shared/signed-request.ts";
import { cardMessage } from "./card.ts";
import { chatUser, discordRoute, interactionAddress } from "./routing.ts";

const MAX_BODY_BYTES = 64 * 1024;

const enum InteractionType {
  Ping = 1,
  ApplicationCommand = 2,
  MessageComponent = 3,
}

const enum ResponseType {
  Pong = 1,
  ChannelMessage = 4,
  DeferredChannelMessage = 5,
  UpdateMessage = 7,
}

const EPHEMERAL = 64;

const pingSchema = z.object({ type: z.literal(InteractionType.Ping) });

const userSchema = z.object({ id: z.string(), username: z.string().optional(), global_name: z.string().nullish() });

const interactionSchema = z.object({
  id: z.string(),
  type: z.number().int(),
  application_id: z.string(),
  token: z.string(),
  guild_id: z.string().optional(),
  channel_id: z.string().optional(),
  channel: z.object({ id: z.string() }).optional(),
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
  const publicKey = secretNamed(c.env, "DISCORD_PUBLIC_KEY");
  if (!publicKey) throw new HttpError(503, "DISCORD_PUBLIC_KEY is not configured");
  const signature = c.req.header("x-signature-ed25519") ?? "";
  const timestamp = c.req.header("x-signature-timestamp") ?? "";
  if (!/^[0-9a-f]{128}$/i.test(signature)) throw new HttpError(401, "missing or malformed X-Signature-Ed25519");
  // Discord specifies no window; 5 minutes keeps a captured request from being replayed later.
  if (!isFreshTimestamp(timestamp)) throw new HttpError(401, "missing or stale X-Signature-Timestamp");
  const raw = await readBody(c, { contentTypes: ["application/json"], maxBytes: MAX_BODY_BYTES });
  if (!(await verifyKey(raw, signature, timestamp, publicKey))) throw new HttpError(401, "bad signature");

  const body = parseJson(raw);
  if (pingSchema.safeParse(body).success) return c.json({ type: ResponseType.Pong });
  const parsed = interactionSchema.safeParse(body);
  if (!parsed.success) throw new HttpError(400, `not an interaction: ${z.prettifyError(parsed.error)}`);
  const interaction = parsed.data;
  switch (interaction.type) {
    case InteractionType.ApplicationCommand:
      return c.json(await command(c.env, interaction));
    case InteractionType.MessageComponent:
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
  return { user, channelId };
}

function message(content: string, flags?: number) {
  return { type: ResponseType.ChannelMessage, data: { content, allowed_mentions: { parse: [] }, ...(flags ? { flags } : {}) } };
}

async function command(env: Env, interaction: Interaction) {
  const { user, channelId } = origin(interaction);
  const route = discordRoute(env, interaction.guild_id, user);
  const name = interaction.data?.name ?? "";
  const base = { id: `discord:interaction:${interaction.id}`, conversation: channelId, user: chatUser(user) };

  if (name === "ask") {
    const text = interaction.data?.options?.find((o) => o.name === "text")?.value;
    if (typeof text !== "string" || text.trim() === "") return message("Usage: /ask text", EPHEMERAL);
    const replyTo = interactionAddress(channelId, interaction.application_id, interaction.token, Date.now());
    const result = await submitEvent(env, route, { ...base, kind: "message", text, replyTo });
    if (!result.accepted) return message("Already received.", EPHEMERAL);
    // The reply comes later through the interaction webhook (or the channel past its 15 minutes).
    return { type: ResponseType.DeferredChannelMessage };
  }
  const chatCommand = COMMANDS.get(name);
  if (!chatCommand) return message(`Unknown command /${name}.`, EPHEMERAL);
  const result = await submitEvent(env, route, { ...base, kind: "command", command: chatCommand });
  // Private, as Slack's are: status names mounts and errors meant for the person asking.
  return message(result.notice ?? "Already received.", EPHEMERAL);
}

async function component(env: Env, interaction: Interaction) {
  const { user, channelId } = origin(interaction);
  // An approval card's buttons carry its decision value (bound to a tenant and agent) as custom_id.
  const decision = parseDecisionValue(interaction.data?.custom_id ?? "");
  if (!decision) return message("This button is not one of mine.", EPHEMERAL);
  const route = discordRoute(env, interaction.guild_id, user);
  const result = await submitEvent(env, route, {
    id: `discord:interaction:${interaction.id}`,
    conversation: channelId,
    user: chatUser(user),
    kind: "decision",
    holdId: decision.holdId,
    approve: decision.approve,
    boundTo: { tenant: decision.tenant, agent: decision.agent },
  });
  // The deciding click sees the card replaced at once; every other click is told privately
  // (the card itself is updated for everyone through the outbox).
  if (result.decided && result.card) {
    return { type: ResponseType.UpdateMessage, data: { ...cardMessage(result.card), allowed_mentions: { parse: [] } } };
  }
  return message(result.notice ?? "Already received.", EPHEMERAL);
}
