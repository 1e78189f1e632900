// POST /webhook/{tenant}/events: a peer's signed JSON event becomes a ChatEvent.
// The tenant is named in the signed body too, so a signed event cannot be
// replayed to another tenant; replies go to the callback_url registered for it.
import type { Context } from "hono";
import * as z from "zod";
import { parseDecisionValue } from "../../approvals/index.ts";
import { httpsOrLoopbackUrl } from "../../lib/config.ts";
import { HttpError, parseJson } from "../../lib/http.ts";
import { CONVERSATION_ID, fetchFiles, parseRoute, submitEvent, type ChatEvent } from "../../runtime/index.ts";
import { textId } from "../shared/ids.ts";
import { callbackFor } from "./callbacks.ts";
import { cardJson } from "./card.ts";
import { defaultAgent } from "./config.ts";
import { WEBHOOK_TEXT_LIMIT } from "./outbound.ts";
import { readWebhookBody } from "./verify.ts";


const base = {
  /** Must equal the URL's tenant: it is inside the signed body, so a signed event cannot be replayed to another tenant. */
  tenant: z.string(),
  /** The sender's id for this event: a retry of one event carries the same key. */
  idempotency_key: textId(200),
  conversation: z.string().regex(CONVERSATION_ID, "conversation: letters, digits, : . _ - (max 200)"),
  user: z.object({ id: textId(200), name: z.string().max(200).optional() }),
  /** Which of the tenant's agents; WEBHOOK_AGENT when absent. */
  agent: z.string().optional(),
};
const text = z.string().trim().min(1, "text must not be empty").max(WEBHOOK_TEXT_LIMIT);
/** Files the peer shares with a message, fetched from their URLs before the event is accepted (runtime/edge/files.ts). */
const files = z
  .array(
    z.object({
      name: z.string().min(1).max(200),
      type: z.string().regex(/^[\w.+-]+\/[\w.+-]+$/, "type is a media type, e.g. image/png"),
      /** As the peer states it: a file found larger is not read whole. */
      size: z.number().int().nonnegative(),
      url: httpsOrLoopbackUrl("files[].url"),
    }),
  )
  .max(10)
  .optional();

const eventSchema = z.discriminatedUnion("type", [
  z.object({ ...base, type: z.literal("message"), text, files }),
  z.object({ ...base, type: z.literal("steer"), text, files }),
  z.object({ ...base, type: z.literal("interrupt") }),
  z.object({ ...base, type: z.literal("command"), command: z.enum(["stop", "compact", "status"]) }),
  /** `value`: the chosen action's value from a card the bridge POSTed. */
  z.object({ ...base, type: z.literal("decision"), value: z.string().refine((v) => parseDecisionValue(v) !== null, "value is not a card action's value") }),
]);
type WebhookEvent = z.infer<typeof eventSchema>;

async function chatEvent(event: WebhookEvent, tenant: string): Promise<ChatEvent> {
  const common = {
    id: `webhook:${event.idempotency_key}`,
    conversation: event.conversation,
    user: { platform: "webhook" as const, id: event.user.id, name: event.user.name },
    replyTo: { platform: "webhook" as const, target: { tenant } },
  };
  switch (event.type) {
    case "message":
    case "steer": {
      const shared = event.files?.map((file) => ({ name: file.name, mimeType: file.type, bytes: file.size, url: new URL(file.url) })) ?? [];
      const attachments = shared.length > 0 ? await fetchFiles(shared, { platform: "the webhook" }) : [];
      return { ...common, kind: event.type, text: event.text, ...(attachments.length > 0 ? { attachments } : {}) };
    }
    case "interrupt":
      return { ...common, kind: "interrupt" };
    case "command":
      return { ...common, kind: "command", command: event.command };
    case "decision": {
      const decision = parseDecisionValue(event.value)!;
      return { ...common, kind: "decision", holdId: decision.holdId, approve: decision.approve, boundTo: { tenant: decision.tenant, agent: decision.agent } };
    }
  }
}

export async function handleEvent(c: Context<{ Bindings: Env }>): Promise<Response> {
  const tenant = c.req.param("tenant") ?? "";
  const parsed = eventSchema.safeParse(parseJson(await readWebhookBody(c, tenant)));
  if (!parsed.success) throw new HttpError(422, z.prettifyError(parsed.error));
  if (parsed.data.tenant !== tenant) throw new HttpError(403, `the signed event is for tenant "${parsed.data.tenant}", not "${tenant}"`);
  const route = parseRoute(tenant, parsed.data.agent ?? defaultAgent(c.env));
  // Replies would have nowhere to go: refuse before anything is written.
  if (!(await callbackFor(c.env, tenant))) throw new HttpError(409, `no callback_url registered for tenant "${tenant}"`);
  const { card, ...result } = await submitEvent(c.env, route, await chatEvent(parsed.data, tenant));
  return c.json({ ...result, ...(card ? { card: cardJson(card) } : {}) }, result.accepted ? 202 : 200);
}
