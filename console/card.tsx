// An approval card as HTML: the console's counterpart of the Slack and Discord
// renderings. Approve and Deny are POST forms while a decision is possible.
import type { Card } from "../approvals/index.ts";
import { CardBadge, PostForm, Time } from "./layout.tsx";
import { Person } from "./names.tsx";

export interface CardForms {
  /** Where the decision is posted, and the token made for it. */
  action: string;
  token: string;
  conversation: string;
}

export function CardView(props: { card: Card; forms: CardForms }) {
  const { card, forms } = props;
  const button = (approve: boolean) => (
    <PostForm action={forms.action} token={forms.token} event>
      <input type="hidden" name="conversation" value={forms.conversation} />
      <input type="hidden" name="approve" value={approve ? "1" : "0"} />
      <button class={approve ? "approve" : "deny"}>{approve ? "Approve" : "Deny"}</button>
    </PostForm>
  );
  return (
    <section class={`card ${card.state}`} id={`hold-${card.holdId}`}>
      <h4>{card.title}</h4>
      <dl>
        <dt>State</dt>
        <dd><CardBadge state={card.state} /></dd>
        <dt>Tool</dt>
        <dd><code>{card.tool}</code></dd>
        <dt>Requested by</dt>
        <dd><Person who={card.requestedBy} /></dd>
        {card.state === "pending" ? (
          <>
            <dt>Expires</dt>
            <dd><Time at={card.expiresAt} /></dd>
          </>
        ) : null}
        {card.decidedBy ? (
          <>
            <dt>Decided by</dt>
            <dd class="decided-by">
              <Person who={card.decidedBy} />
              {card.decidedAt ? <> at <Time at={card.decidedAt} /></> : null}
            </dd>
          </>
        ) : null}
        {card.outcome ? (
          <>
            <dt>Outcome</dt>
            <dd class="outcome">{card.outcome}</dd>
          </>
        ) : null}
      </dl>
      <pre class="arguments">{card.arguments}</pre>
      {card.actions ? <div class="actions">{button(true)}{button(false)}</div> : null}
    </section>
  );
}
