// Delivery of outbox rows to Slack. Replies and notices are posted in the
// thread; the turn's status message is posted once (its ts becomes the ref)
// and then updated in place. The runtime coalesces status updates that have
// not been sent yet, so a turn costs one post and few chat.update calls.
import type { ChatOutbound, DeliveryResult, OutboxDelivery } from "../../runtime/index.ts";
import { stopValue, statusBlocks, statusText } from "./blocks.ts";
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
  const text = toMrkdwn(message.text);
  if (message.kind !== "status") {
    const posted = await callSlack(env, "chat.postMessage", token, { channel, thread_ts, text, unfurl_links: false });
    return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
  }
  const blocks = statusBlocks(message.state, text, stopValue(delivery.route, delivery.conversation));
  const fallback = statusText(message.state, text);
  if (delivery.ref) {
    const updated = await callSlack(env, "chat.update", token, { channel, ts: delivery.ref, text: fallback, blocks });
    return updated.ok ? { ok: true } : updated;
  }
  const posted = await callSlack(env, "chat.postMessage", token, { channel, thread_ts, text: fallback, blocks });
  return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
}

export const slackOutbound: ChatOutbound = {
  platform: "slack",
  split: (text) => splitForSlack(text),
  deliver,
};
