// Delivery of outbox rows to Slack. Replies and notices are posted in the
// thread; the turn's status message and approval cards are posted once (the
// ts becomes the ref) and then updated in place. The runtime coalesces
// updates that have not been sent yet, so a turn costs one post and few
// chat.update calls.
import type { ChatOutbound, DeliveryResult, OutboxDelivery } from "../../runtime/index.ts";
import { cardBlocks, cardFallback, stopValue, statusBlocks, statusText } from "./blocks.ts";
import { botTokenFor } from "./installations.ts";
import { splitForSlack, toMrkdwn } from "./mrkdwn.ts";
import { callSlack } from "./web-api.ts";

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const { channel, thread_ts } = delivery.address.target;
  if (typeof channel !== "string" || typeof thread_ts !== "string") {
    return { ok: false, error: "reply address has no Slack channel and thread", permanent: true };
  }
  const token = await botTokenFor(env, delivery.route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${delivery.route.tenant}`, permanent: true };

  const message = delivery.message;
  switch (message.kind) {
    case "reply":
    case "notice": {
      const posted = await callSlack(env, "chat.postMessage", token, { channel, thread_ts, text: toMrkdwn(message.text), unfurl_links: false });
      return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
    }
    case "status": {
      const text = toMrkdwn(message.text);
      const blocks = statusBlocks(message.state, text, stopValue(delivery.route, delivery.conversation));
      return postOrUpdate(env, token, { channel, thread_ts }, delivery.ref, statusText(message.state, text), blocks);
    }
    case "card":
      return postOrUpdate(env, token, { channel, thread_ts }, delivery.ref, cardFallback(message.card), cardBlocks(message.card));
  }
}

/** Posts a message meant to change in place, or updates it once it has a ref. */
async function postOrUpdate(
  env: Env,
  token: string,
  where: { channel: string; thread_ts: string },
  ref: string | undefined,
  text: string,
  blocks: unknown[],
): Promise<DeliveryResult> {
  if (ref) {
    const updated = await callSlack(env, "chat.update", token, { channel: where.channel, ts: ref, text, blocks });
    return updated.ok ? { ok: true } : updated;
  }
  const posted = await callSlack(env, "chat.postMessage", token, { ...where, text, blocks });
  return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
}

export const slackOutbound: ChatOutbound = {
  platform: "slack",
  split: (text) => splitForSlack(text),
  deliver,
};
