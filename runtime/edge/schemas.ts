// The schemas /v1 routes share: path parameters (with the examples the
// OpenAPI document shows) and the shapes of common answers.
import * as z from "zod";
import { CONVERSATION_ID, NAME } from "./ingress.ts";
import { CHILD_ID } from "../turns/index.ts";

const name = (what: string, example: string) => z.string().regex(NAME, `${what}: letters, digits, . _ - (max 128)`).meta({ examples: [example] });

export const tenantParams = z.object({ tenant: name("tenant", "acme") });
export const agentParams = tenantParams.extend({ agent: name("agent", "helper") });
export const conversationId = (error?: string) => z.string({ error }).regex(CONVERSATION_ID, "conversation: letters, digits, : . _ - (max 200)");
export const conversationParams = agentParams.extend({ id: conversationId().meta({ examples: ["c1"] }) });
/** A conversation to read may also be a child run (`<parent>~child-<n>`, runtime/turns/delegation.ts), which nothing writes to from outside. */
const READABLE_ID = new RegExp(`${CONVERSATION_ID.source}|${CHILD_ID.source}`);
export const conversationReadParams = agentParams.extend({
  id: z.string().regex(READABLE_ID, "conversation: letters, digits, : . _ - (max 200), or a child run's <conversation>~child-<n>").meta({ examples: ["c1"] }),
});
export const holdParams = agentParams.extend({
  holdId: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "hold id: letters, digits, _ - (max 64)")
    .meta({ examples: ["h0123456789abcdef"] }),
});

export const conversationStatus = z.enum(["idle", "running", "waiting_model", "failed"]);
export const conversationState = z.enum(["idle", "running", "waiting_model", "failed", "waiting_approval"]);
/** Model calls summed from the conversation's own job rows; `input` excludes cached tokens read (`cached`) and written (`cacheWrite`). */
const jobUsage = z.object({ calls: z.number(), input: z.number(), cached: z.number(), cacheWrite: z.number(), output: z.number(), cost: z.number() });
const usage = z.object({ inputTokens: z.number(), outputTokens: z.number(), cost: z.number() });
/** A conversation read whole also has its usage today and over the last 30 days, as a tenant's is shown. */
const recentUsage = usage.extend({ today: jobUsage.meta({ description: "Today (UTC)." }), last30Days: jobUsage.meta({ description: "Today and the 29 days before (UTC)." }) });

/** An approval card (approvals/card.ts): its id, tool, state and buttons. */
export const card = z.looseObject({ holdId: z.string(), tool: z.string(), state: z.string() });

/** What the agent answered to an event: whether it was new, and the conversation's state after it. */
export const submitResult = z.object({
  accepted: z.boolean().meta({ description: "False for an event id (Idempotency-Key) seen before." }),
  conversation: z.string(),
  status: conversationStatus,
  first: z.boolean().optional(),
  notice: z.string().optional(),
  card: card.optional(),
  decided: z.boolean().optional(),
});

export const conversationView = z.object({
  id: z.string(),
  status: conversationStatus,
  turn: z.number(),
  error: z.string().nullable(),
  usage: recentUsage,
  busyMs: z.number(),
  busyByTurn: z.array(z.looseObject({ turn: z.number(), busyMs: z.number() })),
  transcript: z.array(z.looseObject({ role: z.string(), text: z.string() })),
  holds: z.array(card),
  family: z.object({
    parent: z.string().nullable().meta({ description: "The conversation whose delegate call started this child run." }),
    children: z.array(z.looseObject({ id: z.string(), state: z.string(), task: z.string() })),
  }),
});

export const conversationSummary = z.object({
  id: z.string(),
  state: conversationState,
  turn: z.number(),
  startedBy: z.string(),
  preview: z.string(),
  error: z.string().nullable(),
  usage,
  createdAt: z.number(),
  updatedAt: z.number(),
});

export const ok = z.looseObject({ ok: z.literal(true) });
