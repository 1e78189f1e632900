// Identifiers a platform sends us, checked before they are used as keys or
// reach a URL: a bad one is a 400 that says what was wrong, never a 500 later.
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import { CONVERSATION_ID } from "../../runtime/index.ts";

/** The conversation id a bridge made from platform ids, checked against the runtime's rule. */
export function conversationId(id: string, madeFrom: string): string {
  if (!CONVERSATION_ID.test(id)) {
    throw new HttpError(400, `${madeFrom} does not make a conversation id (letters, digits, : . _ -, max 200): ${JSON.stringify(id)}`);
  }
  return id;
}

/** A lone UTF-16 surrogate: storage would replace it, so two different ids could become one. */
const LONE_SURROGATE = /\p{Cs}/u;

/** A free-form id from a peer (a user id, an idempotency key): well-formed text of 1 to `max` characters. */
export function textId(max: number) {
  return z
    .string()
    .min(1)
    .max(max)
    .refine((s) => !LONE_SURROGATE.test(s), "must be well-formed Unicode (it has a lone surrogate)");
}
