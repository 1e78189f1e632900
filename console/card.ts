// An approval card as HTML: the console's counterpart of the Slack and Discord
// renderings. Approve and Deny are plain POST forms while a decision is possible.
import type { Card } from "../approvals/index.ts";
import type { Route } from "../runtime/index.ts";
import { html, isoTime, type Html } from "./html.ts";

/** Where the card is shown: its buttons post back to this agent and name the conversation to return to. */
export interface CardPlace {
  route: Route;
  conversation: string;
}

export function cardHtml(card: Card, place: CardPlace): Html {
  const action = `/console/tenants/${encodeURIComponent(place.route.tenant)}/agents/${encodeURIComponent(place.route.agent)}/holds/${encodeURIComponent(card.holdId)}`;
  const button = (approve: boolean) =>
    html`<form method="post" action="${action}" style="display:inline">
<input type="hidden" name="conversation" value="${place.conversation}"><input type="hidden" name="approve" value="${approve ? "1" : "0"}">
<button class="${approve ? "approve" : "deny"}">${approve ? "Approve" : "Deny"}</button></form>`;
  return html`<section class="card ${card.state}" id="hold-${card.holdId}">
<h3>${card.title}</h3>
<dl>
<dt>State</dt><dd class="state">${card.state}</dd>
<dt>Tool</dt><dd>${card.tool}</dd>
<dt>Requested by</dt><dd>${card.requestedBy}</dd>
<dt>Expires</dt><dd>${isoTime(card.expiresAt)}</dd>
${card.decidedBy ? html`<dt>Decided by</dt><dd>${card.decidedBy}${card.decidedAt ? html` at ${isoTime(card.decidedAt)}` : ""}</dd>` : ""}
${card.outcome ? html`<dt>Outcome</dt><dd>${card.outcome}</dd>` : ""}
</dl>
<pre class="arguments">${card.arguments}</pre>
${card.actions ? html`<div class="actions">${button(true)}${button(false)}</div>` : ""}
</section>`;
}
