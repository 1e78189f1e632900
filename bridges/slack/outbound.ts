// Delivery of outbox rows to Slack. Replies and notices are posted in the
// thread; the turn's status message and approval cards are posted once (the
// ts becomes the ref) and then updated in place. The runtime coalesces
// updates that have not been sent yet, so a turn costs one post and few
// chat.update calls.
import type { KnownBlock } from "@slack/types";
import type { ChatOutbound, DeliveryResult, OutboxDelivery } from "../../runtime/index.ts";
import { clip } from "../shared/text.ts";
import { isAssistantThread, setStatus } from "./assistant.ts";
import { cardBlocks, cardFallback } from "./card.ts";
import { botTokenFor } from "./installations.ts";
import { SLACK_TEXT_LIMIT, splitForSlack, toMrkdwn } from "./mrkdwn.ts";
import { STATUS_LIMIT, statusBlocks, statusText, stopValue } from "./status.ts";
import { callSlack } from "./web-api.ts";

/** What we send to chat.postMessage and chat.update (their other arguments are not used). */
type SlackMessage = { channel: string; thread_ts?: string; ts?: string; text: string; blocks?: KnownBlock[]; unfurl_links?: boolean };

async function deliver(env: Env, delivery: OutboxDelivery): Promise<DeliveryResult> {
  const { channel, thread_ts } = delivery.address.target;
  // A DM's running conversation is answered in the DM itself: no thread.
  if (typeof channel !== "string" || (thread_ts !== undefined && typeof thread_ts !== "string")) {
    return { ok: false, error: "reply address has no Slack channel (and thread)", permanent: true };
  }
  const token = await botTokenFor(env, delivery.route.tenant);
  if (!token) return { ok: false, error: `no bot token for workspace ${delivery.route.tenant}`, permanent: true };

  const thread = thread_ts === undefined ? { channel } : { channel, thread_ts };
  const message = delivery.message;
  switch (message.kind) {
    case "reply":
    case "notice": {
      // Replies arrive split to fit; a notice (a long provider error, say) is clipped, never refused.
      const text = clip(toMrkdwn(message.text), SLACK_TEXT_LIMIT);
      const posted = await callSlack(env, "chat.postMessage", token, { ...thread, text, unfurl_links: false } satisfies SlackMessage);
      return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
    }
    case "status": {
      // An assistant thread shows the working state under its input instead (cleared once the turn ends).
      if (thread_ts !== undefined && isAssistantThread(delivery.address.target)) {
        const set = await setStatus(env, token, channel, thread_ts, message.state === "working" ? "is thinking…" : "");
        return set.ok ? { ok: true } : set;
      }
      const text = clip(toMrkdwn(message.text), STATUS_LIMIT);
      const blocks = statusBlocks(message.state, text, stopValue(delivery.route, delivery.conversation));
      return postOrUpdate(env, token, delivery.ref, { ...thread, text: statusText(message.state, text), blocks });
    }
    case "card":
      return postOrUpdate(env, token, delivery.ref, { ...thread, text: cardFallback(message.card), blocks: cardBlocks(message.card) });
  }
}

/** Posts a message meant to change in place, or updates it once it has a ref (chat.update takes no thread_ts). */
async function postOrUpdate(env: Env, token: string, ref: string | undefined, message: SlackMessage): Promise<DeliveryResult> {
  if (ref) {
    const { channel, text, blocks } = message;
    const updated = await callSlack(env, "chat.update", token, { channel, ts: ref, text, blocks } satisfies SlackMessage);
    return updated.ok ? { ok: true } : updated;
  }
  const posted = await callSlack(env, "chat.postMessage", token, message);
  return posted.ok ? { ok: true, ref: String(posted.data.ts) } : posted;
}

export const slackOutbound: ChatOutbound = {
  platform: "slack",
  split: (text) => splitForSlack(text),
  deliver,
};
