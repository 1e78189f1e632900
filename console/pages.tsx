// The console's pages as components. Each page that changes while you look at
// it has a live region (data-live) the page's script refreshes from the same
// URL; the handlers in index.tsx render the region alone for those requests.
import type { Child } from "hono/jsx";
import {
  conversationState,
  FILE_ACCEPT,
  FILE_CAPS,
  type AgentListing,
  type ConversationPage,
  type ConversationView,
  type PendingApproval,
  type Route,
  type TenantListing,
} from "../runtime/index.ts";
import { clip } from "../lib/text.ts";
import { CardView } from "./card.tsx";
import { PostForm, StateBadge, Time, usd } from "./layout.tsx";
import { actionPath, agentPath, conversationPath, holdPath, tenantPath } from "./paths.ts";
import { BASE } from "./session.ts";
import { Transcript } from "./transcript.tsx";
import { Person } from "./names.tsx";
import { ConversationUsage } from "./usage.tsx";

/** Form tokens by action path, made by the handler before rendering (they are async). */
export type Tokens = ReadonlyMap<string, string>;

function tokenFor(tokens: Tokens, action: string): string {
  return tokens.get(action) ?? "";
}

export function LiveRegion(props: { mark: string; children?: Child }) {
  return (
    <>
      <p id="live-note" class="muted">Updates by itself while the page is open.</p>
      <div data-live="" data-mark={props.mark}>{props.children}</div>
    </>
  );
}

/** The files a message form may carry: pictures and text files, read as the Agents API reads its attachments. */
function FilesField() {
  return (
    <label>Files, if any ({FILE_CAPS}) <input type="file" name="files" multiple accept={FILE_ACCEPT} /></label>
  );
}

export function OpenAgentForm(props: { tenant?: string }) {
  return (
    <form method="get" action={BASE}>
      <label>Tenant <input type="text" name="tenant" value={props.tenant ?? ""} required /></label>
      <label>Agent <input type="text" name="agent" required /></label>
      <button>Open agent</button>
    </form>
  );
}

export function ApprovalList(props: { approvals: PendingApproval[]; showAgent: boolean }) {
  if (props.approvals.length === 0) return <p class="muted">Nothing is waiting for approval.</p>;
  return (
    <table class="approvals">
      <thead>
        <tr><th>Waiting since</th>{props.showAgent ? <th>Tenant · agent</th> : null}<th>Tool</th><th>Requested by</th><th>Conversation</th></tr>
      </thead>
      <tbody>
        {props.approvals.map((a) => (
          <tr>
            <td><Time at={a.createdAt} /></td>
            {props.showAgent ? <td><a href={agentPath(a.route)}>{`${a.route.tenant} · ${a.route.agent}`}</a></td> : null}
            <td><code>{a.card.tool}</code></td>
            <td>{a.card.requestedBy}</td>
            <td><a href={`${conversationPath(a.route, a.conversation)}#hold-${a.card.holdId}`}>{a.conversation}</a></td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function HomeBody(props: { tenants: TenantListing[]; approvals: PendingApproval[]; unreachable: number; truncated: boolean }) {
  return (
    <>
      <h3>Waiting for approval, oldest first</h3>
      <ApprovalList approvals={props.approvals} showAgent />
      {props.unreachable > 0 ? <p class="muted">{`${props.unreachable} agent(s) could not be asked; their approvals are not listed.`}</p> : null}
      {props.truncated ? <p class="muted">Only the first agents of the directory were asked; open an agent to see all of its approvals.</p> : null}
      <h3>Tenants</h3>
      {props.tenants.length === 0 ? (
        <p class="muted">No agent has taken an event yet.</p>
      ) : (
        <table class="tenants">
          <thead><tr><th>Tenant</th><th>Name</th><th>Platform</th><th class="num">Agents</th><th>First seen</th></tr></thead>
          <tbody>
            {props.tenants.map((t) => (
              <tr>
                <td><a href={tenantPath(t.tenant)}>{t.tenant}</a></td>
                <td>{t.displayName ?? <span class="muted">unknown</span>}</td>
                <td>{t.platforms.join(", ") || <span class="muted">unknown</span>}</td>
                <td class="num">{t.agents}</td>
                <td><Time at={t.firstSeen} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Open an agent by name</h3>
      <p class="muted">For agents not in the list (the directory lists an agent from its first event on).</p>
      <OpenAgentForm />
      <p class="muted">
        Driving agents from a program: the <a href={`${BASE}/reference`}>API reference</a>.
      </p>
    </>
  );
}

export function TenantBody(props: { tenant: string; agents: AgentListing[] }) {
  return (
    <>
      {props.agents.length === 0 ? (
        <p class="muted">No agent of this tenant is in the directory.</p>
      ) : (
        <table class="agents">
          <thead><tr><th>Agent</th><th>Platform</th><th>First seen</th></tr></thead>
          <tbody>
            {props.agents.map((a) => (
              <tr>
                <td><a href={agentPath(a)}>{a.agent}</a></td>
                <td>{a.platform ?? <span class="muted">unknown</span>}</td>
                <td><Time at={a.firstSeen} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Open an agent by name</h3>
      <OpenAgentForm tenant={props.tenant} />
    </>
  );
}

export interface AgentListState {
  route: Route;
  approvals: PendingApproval[];
  page: ConversationPage;
  search: string;
  /** The link to the next page, when there is one. */
  olderHref?: string;
}

export function AgentLive(props: AgentListState) {
  const { route, page } = props;
  return (
    <>
      <h3>Waiting for approval</h3>
      <ApprovalList approvals={props.approvals} showAgent={false} />
      <h3>{props.search ? "Conversations matching the search, newest first" : "Conversations, newest first"}</h3>
      {page.conversations.length === 0 ? (
        <p class="muted">{props.search ? "No conversation matches this search." : "No conversations yet."}</p>
      ) : (
        <table class="conversations">
          <thead>
            <tr><th>Conversation</th><th>State</th><th>First message</th><th>Started by</th><th class="num">Tokens in / out</th><th class="num">Cost</th><th>Updated</th></tr>
          </thead>
          <tbody>
            {page.conversations.map((conv) => (
              <tr>
                <td><a href={conversationPath(route, conv.id)}>{conv.id}</a></td>
                <td><StateBadge state={conv.state} /></td>
                <td>{conv.preview}</td>
                <td><Person who={conv.startedBy} /></td>
                <td class="num">{`${conv.usage.inputTokens} / ${conv.usage.outputTokens}`}</td>
                <td class="num">{usd(conv.usage.cost)}</td>
                <td><Time at={conv.updatedAt} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {props.olderHref ? <p><a href={props.olderHref} rel="next">Older conversations →</a></p> : null}
    </>
  );
}

export function AgentBody(props: AgentListState & { mark: string; tokens: Tokens; newConversation: string }) {
  return (
    <>
      <form method="get" action={agentPath(props.route)} class="search">
        <label>Search conversations <input type="search" name="q" value={props.search} placeholder="words from a message, or an id" /></label>
        <button>Search</button>
        {props.search ? <a href={agentPath(props.route)}>Clear</a> : null}
      </form>
      <LiveRegion mark={props.mark}>
        <AgentLive {...props} />
      </LiveRegion>
      <h3>Start a conversation</h3>
      <PostForm action={props.newConversation} token={tokenFor(props.tokens, props.newConversation)} event files>
        <label>Message, sent as console:admin <textarea name="text" required /></label>
        <FilesField />
        <button>Send</button>
      </PostForm>
    </>
  );
}

export interface ConversationProps {
  route: Route;
  view: ConversationView;
  tokens: Tokens;
}

export function ConversationLive(props: ConversationProps) {
  const { route, view, tokens } = props;
  const state = conversationState(view.status, view.holds.filter((card) => card.state === "pending").length);
  const running = view.status === "running" || view.status === "waiting_model";
  const stop = actionPath(route, view.id, "stop");
  const compact = actionPath(route, view.id, "compact");
  const { parent, children } = view.family;
  return (
    <>
      {parent ? (
        <p>
          {"A child run of "}
          <a href={conversationPath(route, parent)} rel="up">{parent}</a>
          {": it answers that conversation's delegate call, and is stopped with it."}
        </p>
      ) : null}
      <div class="facts">
        <span>State: <StateBadge state={state} /></span>
        <span>{`Turn ${view.turn}`}</span>
        <span>{`Tokens: ${view.usage.inputTokens} in, ${view.usage.outputTokens} out`}</span>
        <span>{`Cost: ${usd(view.usage.cost)}`}</span>
        <span>{`Object busy: ${Math.round(view.busyMs)} ms`}</span>
        <span class="actions">
          {parent ? null : running ? (
            <PostForm action={stop} token={tokenFor(tokens, stop)} event>
              <button>Stop the turn</button>
            </PostForm>
          ) : (
            <PostForm action={compact} token={tokenFor(tokens, compact)} event>
              <button>Compact</button>
            </PostForm>
          )}
        </span>
      </div>
      {view.error ? <p class="error">{`Last error: ${view.error}`}</p> : null}
      <ConversationUsage usage={view.usage} />
      <h3>Approvals</h3>
      {view.holds.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        view.holds.map((card) => {
          const action = holdPath(route, card.holdId);
          return <CardView card={card} forms={{ action, token: tokenFor(tokens, action), conversation: view.id }} />;
        })
      )}
      {children.length > 0 ? <Children route={route} children={children} /> : null}
      <h3>Transcript</h3>
      <Transcript entries={view.transcript} />
    </>
  );
}

/** The child runs a conversation delegated to, oldest first, each linked to its transcript. */
function Children(props: { route: Route; children: ConversationView["family"]["children"] }) {
  return (
    <>
      <h3>Child runs</h3>
      <table class="children">
        <thead>
          <tr><th>Child</th><th>State</th><th>Task</th></tr>
        </thead>
        <tbody>
          {props.children.map((child) => (
            <tr>
              <td>{child.state === "queued" ? child.id : <a href={conversationPath(props.route, child.id)}>{child.id}</a>}</td>
              <td>{child.state}</td>
              <td>{clip(child.task, 200)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** `as`: who the console sends as (console:admin, or the signed-in person). */
export function ConversationBody(props: ConversationProps & { mark: string; as: string }) {
  const send = actionPath(props.route, props.view.id, "messages");
  return (
    <>
      <LiveRegion mark={props.mark}>
        <ConversationLive {...props} />
      </LiveRegion>
      {props.view.family.parent ? null : (
        <>
          <h3>Send a message</h3>
          <PostForm action={send} token={tokenFor(props.tokens, send)} event files>
            <label>As {props.as}; while a turn runs, the agent treats it as its page says for a second message. <textarea name="text" required /></label>
            <FilesField />
            <button>Send</button>
          </PostForm>
        </>
      )}
    </>
  );
}
