// The page frame and the small pieces every page uses: human words for states,
// times, and forms that carry their token. hono/jsx escapes every value.
import type { Child } from "hono/jsx";
import type { CardState } from "../approvals/index.ts";
import type { ConversationState } from "../runtime/index.ts";
import { CLIENT_SCRIPT } from "./client.ts";
import { BASE } from "./session.ts";

const STYLE = `
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#dadce0;--soft:#f5f5f7;--link:#0b5cad}
body{font:15px/1.5 system-ui,sans-serif;max-width:68rem;margin:0 auto;padding:0 1rem 3rem;color:var(--fg)}
header{display:flex;gap:1rem;align-items:center;border-bottom:1px solid var(--line);margin-bottom:1rem}
header h1{font-size:1.2rem;margin:.8rem 0}header form{margin-left:auto}
nav.crumbs{color:var(--muted);margin:.2rem 0 .6rem}nav.crumbs a{margin-right:.3rem}
a{color:var(--link)}h2{font-size:1.35rem;margin:.4rem 0 .8rem}h3{font-size:1.05rem;margin:1.4rem 0 .5rem}
pre{white-space:pre-wrap;word-break:break-word;background:var(--soft);padding:.5rem .7rem;border-radius:4px;margin:.3rem 0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.35rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);font-size:.85rem}td.num,th.num{text-align:right;white-space:nowrap}
label{display:block;margin:.4rem 0}input[type=text],input[type=password],input[type=search],textarea{padding:.35rem;font:inherit;min-width:16rem}
textarea{width:100%;box-sizing:border-box;min-height:4.5rem}
button{padding:.3rem .9rem;margin-right:.4rem;font:inherit;cursor:pointer}
.result,.warning{background:#fff4ce;border:1px solid #f0d58c;padding:.5rem .8rem;border-radius:4px}
.muted,small{color:var(--muted)}
.badge{display:inline-block;padding:.05rem .5rem;border-radius:999px;font-size:.82rem;font-weight:600;background:#e8eaed;white-space:nowrap}
.badge.running,.badge.waiting_model,.badge.approved{background:#d2e3fc;color:#174ea6}
.badge.waiting_approval,.badge.pending{background:#feefc3;color:#7a4f01}
.badge.failed,.badge.denied,.badge.refused,.badge.expired,.badge.unknown{background:#fce8e6;color:#a50e0e}
.badge.performed{background:#ceead6;color:#0d652d}
.entry{border-left:3px solid var(--line);padding:.1rem 0 .1rem .7rem;margin:.7rem 0}
.entry.user{border-color:#8ab4f8}.entry.assistant{border-color:#81c995}.entry.tool{border-color:#fdd663}.entry.note{border-color:#c58af9}.entry.compaction{border-color:#f28b82;border-left-style:dashed}
.who{font-weight:600;margin-right:.4rem}.md p{margin:.3rem 0}.md pre{margin:.4rem 0}
.card{border:1px solid var(--line);border-radius:6px;padding:.6rem 1rem;margin:.8rem 0}.card.pending{border-color:#d08700}
.card h4{margin:.2rem 0 .4rem}.card dl{display:grid;grid-template-columns:9rem 1fr;gap:.2rem .6rem;margin:.3rem 0}.card dt{color:var(--muted)}.card dd{margin:0}
.approve{background:#1a7f37;color:#fff;border:1px solid #1a7f37}.deny{background:#cf222e;color:#fff;border:1px solid #cf222e}
.actions form{display:inline}.facts{display:flex;flex-wrap:wrap;gap:.3rem 1.4rem;align-items:center}
details summary{cursor:pointer;color:var(--muted)}
.chart{margin:.8rem 0}.chart figcaption{font-size:.9rem}.chart .key{margin-left:.6rem}
`;

const STATE_WORDS: Record<ConversationState, string> = {
  idle: "Idle",
  running: "Running",
  waiting_model: "Waiting for the model",
  waiting_approval: "Waiting for approval",
  failed: "Failed",
};

const CARD_WORDS: Record<CardState, string> = {
  pending: "Waiting for a decision",
  approved: "Approved, being performed",
  denied: "Denied",
  expired: "Expired",
  performed: "Performed",
  failed: "Performed, but it failed",
  refused: "Refused by policy",
  unknown: "Outcome unknown",
};

export function stateWords(state: ConversationState): string {
  return STATE_WORDS[state];
}

export function StateBadge(props: { state: ConversationState }) {
  return <span class={`badge ${props.state}`}>{STATE_WORDS[props.state]}</span>;
}

export function CardBadge(props: { state: CardState }) {
  return <span class={`badge ${props.state}`}>{CARD_WORDS[props.state]}</span>;
}

/** A time in UTC on the server; the page's script shows it in the reader's zone. */
export function Time(props: { at: number }) {
  const iso = new Date(props.at).toISOString();
  return <time datetime={iso}>{`${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`}</time>;
}

export function usd(cost: number): string {
  return `$${cost.toFixed(cost > 0 && cost < 0.01 ? 4 : 2)}`;
}

/** A POST form with its token and, for events, a fresh event id (a resubmitted form is one event); `files`: it has a file input, so it is sent as multipart/form-data. */
export function PostForm(props: { action: string; token: string; event?: boolean; files?: boolean; class?: string; children?: Child }) {
  return (
    <form method="post" action={props.action} class={props.class} enctype={props.files ? "multipart/form-data" : undefined}>
      <input type="hidden" name="_token" value={props.token} />
      {props.event ? <input type="hidden" name="event" value={crypto.randomUUID()} /> : null}
      {props.children}
    </form>
  );
}

export interface PageFrame {
  title: string;
  nonce: string;
  /** The sign-out form's token; absent on pages shown before signing in. */
  signOutToken?: string;
  crumbs?: { href: string; label: string }[];
  result?: string;
  children?: Child;
}

export function Page(props: PageFrame) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width,initial-scale=1" />
        <title>{`${props.title} · antiproton console`}</title>
        <style nonce={props.nonce} dangerouslySetInnerHTML={{ __html: STYLE }} />
      </head>
      <body>
        <header>
          <h1><a href={BASE}>antiproton</a></h1>
          {props.signOutToken !== undefined ? (
            <PostForm action={`${BASE}/logout`} token={props.signOutToken}>
              <button>Sign out</button>
            </PostForm>
          ) : null}
        </header>
        {props.crumbs?.length ? (
          <nav class="crumbs">
            {props.crumbs.map((crumb) => (
              <>
                <a href={crumb.href}>{crumb.label}</a>›{" "}
              </>
            ))}
          </nav>
        ) : null}
        <main>
          <h2>{props.title}</h2>
          {props.result ? <p class="result" role="status">{props.result}</p> : null}
          {props.children}
        </main>
        <script nonce={props.nonce} dangerouslySetInnerHTML={{ __html: CLIENT_SCRIPT }} />
      </body>
    </html>
  );
}
