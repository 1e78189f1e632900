// How a bridge (or the Agents API) reaches an agent: validate the route, find
// the object, submit the event.
import { accepted } from "../object/index.ts";
import { type ConversationView, agentStub } from "../object/index.ts";
import { CHILD_ID } from "../turns/index.ts";
import type { Attachment, ChatEvent, Route, SubmitResult } from "../chat.ts";
import { storeImage } from "../store/index.ts";
import { fromBase64 } from "../../lib/base64.ts";
import { ConfigError } from "../../lib/config.ts";
import { HttpError } from "../../lib/http.ts";
import { tenantDayLine } from "../metering/index.ts";

export const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
/** What a conversation id may be, whichever bridge chose it. */
export const CONVERSATION_ID = /^[A-Za-z0-9][A-Za-z0-9:._-]{0,199}$/;

/** Tenant and agent names are restricted so "tenant:agent" names exactly one object. */
export function parseRoute(tenant: string, agent: string): Route {
  if (!NAME.test(tenant)) throw new HttpError(400, `invalid tenant "${tenant}": use letters, digits, . _ - (max 128)`);
  if (!NAME.test(agent)) throw new HttpError(400, `invalid agent "${agent}": use letters, digits, . _ - (max 128)`);
  return { tenant, agent };
}

/** A conversation as the Agents API and the console show it: 400 for a bad id, 404 for an unknown one. */
export async function readConversation(env: Env, route: Route, id: string): Promise<ConversationView> {
  if (!CONVERSATION_ID.test(id) && !CHILD_ID.test(id)) throw new HttpError(400, "invalid conversation id");
  const view = await agentStub(env, route).conversation(route, id);
  if (!view) throw new HttpError(404, `no conversation "${id}" for agent ${route.agent} of tenant ${route.tenant}`);
  return view;
}

/** `caller`: who sent it through /v1, for the audit row of a change it makes (the agent writes it with the change). */
export async function submitEvent(env: Env, route: Route, event: ChatEvent, caller?: string): Promise<SubmitResult> {
  let result: SubmitResult;
  try {
    const stored = await withStoredImages(env, route, event);
    // An accept: once it queues, passes of this isolate wait for it (runtime/object/accepts-first.ts).
    result = await accepted(() => agentStub(env, route).submit(route, stored, caller));
  } catch (err) {
    throw restoredError(err);
  }
  // `status` shows the tenant's day too, read here from its ledger rather than by the object.
  if (event.kind === "command" && event.command === "status" && result.accepted && result.notice?.startsWith("Status:")) {
    return { ...result, notice: `${result.notice}\n${await tenantDayLine(env, route.tenant)}` };
  }
  return result;
}

/**
 * A message's images go to R2 before the event reaches the object: its log
 * row, its job rows and its queue messages carry only their sha256. A
 * platform's retry stores nothing again.
 */
export async function withStoredImages(env: Env, route: Route, event: ChatEvent): Promise<ChatEvent> {
  if ((event.kind !== "message" && event.kind !== "steer") || !event.attachments?.some((file) => file.kind === "image" && file.data !== undefined)) return event;
  const attachments = await Promise.all(
    event.attachments.map(async (file): Promise<Attachment> => {
      if (file.kind !== "image" || file.data === undefined) return file;
      const { ref } = await storeImage(env.LARGE_VALUES, route, fromBase64(file.data), file.mimeType);
      return { name: file.name, mimeType: file.mimeType, bytes: file.bytes, kind: "image", ref };
    }),
  );
  return { ...event, attachments };
}

/**
 * An error thrown inside the object reaches the Worker as a plain Error whose
 * message starts with its class name. Those with a meaning for the request are
 * made so again: a ConfigError (a malformed APPROVERS read while deciding)
 * answers 503 naming the variable, an IdentityError (a tenant another bridge
 * owns) 403, an AgentDeletedError (runtime/object/deletion.ts) 404, rather than 500.
 */
export function restoredError(err: unknown): unknown {
  if (!(err instanceof Error) || err instanceof ConfigError || err instanceof HttpError) return err;
  const [name, ...rest] = err.message.split(": ");
  const message = rest.join(": ");
  if (name === "ConfigError") return new ConfigError(message);
  if (name === "IdentityError") return new HttpError(403, message);
  if (name === "AgentDeletedError") return new HttpError(404, message);
  return err;
}
