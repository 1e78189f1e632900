// A reply streamed while the model writes it. In a 1:1 chat Teams streams:
// the first update (a typing activity with a streaminfo entity, sequence 1)
// opens the stream and its answer names it, each later update carries the
// whole text so far with a higher sequence, and a message with streamType
// "final" ends it as an ordinary message. Elsewhere (channels, group chats,
// where Teams does not stream) the reply is one message, posted then updated.
// A stream's ref is "stream:<id>:<opened at ms>": its sequence numbers are
// counted from that time in tenths of a second, so a courier run again after
// a crash goes on past the first one's without being told each number.
import { openingSince, type DeliveryResult, type Route, type StreamTarget } from "../../runtime/index.ts";
import { activitiesPath, targetSchema } from "./address.ts";
import { callConnector, deliveryOf } from "./connector.ts";

const STREAM_REF = /^stream:([^:]+):(\d{1,15})$/;

const sequenceAt = (openedAt: number) => 2 + Math.floor((Date.now() - openedAt) / 100);

/** The stream a ref names, if it names one. */
export function streamOf(ref: string | undefined): { id: string; openedAt: number } | undefined {
  const match = ref === undefined ? null : STREAM_REF.exec(ref);
  return match ? { id: match[1]!, openedAt: Number(match[2]) } : undefined;
}

export async function streamReply(env: Env, _route: Route, stream: StreamTarget, text: string): Promise<DeliveryResult> {
  const target = targetSchema.safeParse(stream.address.target);
  if (!target.success) return { ok: false, error: "reply address is not a Teams conversation", permanent: true };
  const { serviceUrl, conversationId, direct } = target.data;
  // A message whose opening was never answered is not looked for (the Connector cannot be asked): a new one is opened.
  const ref = openingSince(stream.ref) === undefined ? stream.ref : undefined;
  const post = (activity: Record<string, unknown>) => callConnector(env, serviceUrl, "POST", activitiesPath(conversationId), activity);
  if (!direct) {
    if (ref === undefined) return deliveryOf(await post({ type: "message", textFormat: "markdown", text }));
    const updated = deliveryOf(await callConnector(env, serviceUrl, "PUT", activitiesPath(conversationId, ref), { type: "message", textFormat: "markdown", text, id: ref }));
    return updated.ok ? { ok: true, ref } : updated;
  }
  const open = streamOf(ref);
  if (!open) {
    const openedAt = Date.now();
    const opened = deliveryOf(await post({ type: "typing", text, entities: [{ type: "streaminfo", streamType: "streaming", streamSequence: 1 }] }));
    if (!opened.ok) return opened;
    return opened.ref ? { ok: true, ref: `stream:${opened.ref}:${openedAt}` } : { ok: false, error: "Teams opened the stream without naming it", permanent: true };
  }
  const entity = { type: "streaminfo", streamId: open.id, streamType: "streaming", streamSequence: sequenceAt(open.openedAt) };
  const updated = deliveryOf(await post({ type: "typing", text, entities: [entity] }));
  return updated.ok ? { ok: true, ref: ref! } : updated;
}

/** The outbox's finish of a 1:1 stream: the final message, with the whole (first part of the) reply. */
export async function finishStream(env: Env, serviceUrl: string, conversationId: string, streamId: string, text: string): Promise<DeliveryResult> {
  const final = { type: "message", textFormat: "markdown", text, entities: [{ type: "streaminfo", streamId, streamType: "final" }] };
  const result = deliveryOf(await callConnector(env, serviceUrl, "POST", activitiesPath(conversationId), final));
  return result.ok ? { ok: true, ref: streamId } : result;
}
