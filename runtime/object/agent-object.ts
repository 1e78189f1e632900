// AgentObject: one Durable Object per (tenant, agent), with its own SQLite.
// It keeps the RPC surface and wires the parts together: the conversation
// store, inbound (the durable write of what people send), the turn state
// machine, model jobs, the tool-call journal, the approvals glue, the outbox,
// the scheduler, the pass (runtime/object/pass.ts) and retention after it.
import { DurableObject } from "cloudflare:workers";
import { cardFor, holdRows, Holds, type Card, type Person } from "../../approvals/index.ts";
import { Gateway, type ToolOutput } from "../../plugins/index.ts";
import { ApprovalFlow, Leases, machineIdleMs, MountSessions, ScriptCalls, type ScriptAnswer, type ScriptCall, ToolCalls, toolCallRows, type ToolReport, ToolLists } from "../tools/index.ts";
import { AGENT_HANDLERS, BusyTime, busyTurnRows, measureHandlers, type TurnBusy, dayStart } from "../metering/index.ts";
import { type ChatEvent, type ChatUser, type ConversationStatus, outboundFor, type Platform, type Route, type StreamShown, type SubmitResult, type RuntimeDeps } from "../chat.ts";
import { Claims, type EffectReport, type EffectWork, type ReportAnswer } from "./claims.ts";
import { deadlineMs, leaseSeconds, Effects, type EffectKind, Outbox, outboxRows, Typing } from "../effects/index.ts";
import { modelChoice, ModelJobs, type RecentUsage } from "../models/index.ts";
import { modelFrom, mountsFrom, NO_SETTINGS, platformSecret, registerAgent, secondMessageFrom, SettingsCopy, type SettingsText } from "../control/index.ts";
import { Conversations, Identity, logRows, transcript, type TranscriptEntry } from "../store/index.ts";
import { Retention, retentionMs } from "../store/index.ts";
import { DELEGATE, Delegation, type Family } from "../turns/index.ts";
import { feedAfter, type FeedPage, feedRows, followAsk, Followers, type FunctionTool, type ResponseEvents, type ResponseRefusal, type ResponseRequest, responseMessage, Responses, type ResponseState, tellFollowersAfterEachCall } from "../feed/index.ts";
import { AgentDeletion, type DeletionReport } from "./deletion.ts";
import { AuditOutbox } from "./audit-outbox.ts";
import { Inbound } from "./inbound.ts";
import { Pass } from "./pass.ts";
import { migrate } from "./schema.ts";
import { Scheduler } from "./scheduler.ts";
import { statusText } from "./status.ts";
import { systemPrompt, Turns } from "../turns/index.ts";
import type { PassContext } from "../pass-context.ts";
import { changeMark, conversationPage, pendingApprovals, type ConversationPage, type ConversationQuery, type PendingApproval } from "./views.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

export interface ConversationView {
  id: string;
  status: ConversationStatus;
  turn: number;
  error: string | null;
  usage: { inputTokens: number; outputTokens: number; cost: number } & RecentUsage;
  /** The object's busy time on this conversation (runtime/metering/busy-time.ts), in all and per turn. */
  busyMs: number;
  busyByTurn: TurnBusy[];
  transcript: TranscriptEntry[];
  /** Approval cards of this conversation, oldest first. */
  holds: Card[];
  /** The child runs it delegated to, and its parent if it is one (runtime/turns/delegation.ts). */
  family: Family;
}

export class AgentObject extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly store: Conversations;
  private readonly effects: Effects;
  private readonly jobs: ModelJobs;
  private readonly tools: ToolCalls;
  private readonly toolLists: ToolLists;
  private readonly sessions: MountSessions;
  private readonly settings: SettingsCopy;
  private readonly outbox: Outbox;
  private readonly typing: Typing;
  private readonly turns: Turns;
  private readonly approvals: ApprovalFlow;
  private readonly leases: Leases;
  private readonly audits: AuditOutbox;
  private readonly scheduler: Scheduler;
  private readonly identity: Identity;
  private readonly scripts: ScriptCalls;
  private readonly inbound: Inbound;
  private readonly pass: Pass;
  private readonly claims: Claims;
  private readonly retention: Retention;
  private readonly delegation: Delegation;
  private readonly responses: Responses;
  private readonly deletion: AgentDeletion;
  /** Measures every handler (measureHandlers below). */
  readonly busyTime: BusyTime;
  /** Told what was written at the end of every handler (tellFollowersAfterEachCall below) and of every pass. */
  readonly followers: Followers;

  constructor(
    ctx: DurableObjectState,
    env: Env,
    private readonly deps: RuntimeDeps,
  ) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.identity = new Identity(ctx.storage, migrate);
    this.busyTime = new BusyTime(() => (this.identity.ready() ? this.sql : null), {
      effect: (kind, id) => this.effects.conversationOf(kind, id),
      job: (id) => this.jobs.conversationOf(id),
      call: (key) => this.tools.conversationOf(key),
    });
    const id = ctx.id.toString();
    // What a DM is, each bridge says (the runtime names none).
    this.store = new Conversations(this.sql, (by, address, route) => outboundFor(deps, by.platform)?.isDirect?.(by, address, route) ?? false);
    this.responses = new Responses(this.sql);
    this.followers = new Followers(ctx, () => this.identity.route());
    this.effects = new Effects(this.sql, leaseSeconds(env) * 1000, deadlineMs(env));
    this.sessions = new MountSessions(this.sql);
    this.settings = new SettingsCopy(this.sql);
    this.jobs = new ModelJobs(ctx.storage, id, env.LARGE_VALUES, this.effects);
    // The approvals glue and the turn machine call each other: each is handed the other's few verbs.
    this.tools = new ToolCalls(ctx.storage, this.store, this.effects, this.sessions, (pass, conv, key, call) => this.approvals.hold(pass, conv, key, call), {
      answersLater: (name) => this.delegation.answersLater(name),
      take: (pass, conv, key, call) => this.delegation.take(pass, conv, key, call),
    }, (conv) => this.responses.functionsOf(conv.id, conv.turn));
    this.delegation = new Delegation(this.sql, env, this.store, this.tools, () => this.turns);
    this.toolLists = new ToolLists(this.store, this.effects, this.sessions);
    this.outbox = new Outbox(ctx.storage, id, deps, this.effects, (conversation, error) => this.store.noteError(conversation, error));
    const holds = new Holds(this.sql);
    this.typing = new Typing(env, this.effects, this.store, holds, deps);
    this.approvals = new ApprovalFlow(ctx.storage, env, holds, this.store, this.tools, this.effects, this.sessions, {
      notify: (conversation, text) => this.turns.notify(conversation, text),
      post: (conversation, message, refKey) => this.turns.post(conversation, message, refKey),
    });
    this.turns = new Turns(ctx.storage, this.store, this.jobs, this.tools, this.outbox, this.typing, this.approvals, () => secondMessageFrom(this.settings.get() ?? NO_SETTINGS), this.delegation);
    // Retention runs SQL on the store's tables only; each other room does its part on its own.
    this.retention = new Retention(ctx.storage, env.LARGE_VALUES, () => retentionMs(env), {
      tables: [feedRows(this.sql), logRows(this.sql), toolCallRows(this.sql), holdRows(this.sql), outboxRows(this.sql), busyTurnRows(this.sql)],
      busy: () =>
        new Set([
          ...this.effects.openConversations("audit"),
          ...this.leases.openConversations(),
          ...this.outbox.openConversations(),
          ...this.jobs.openConversations(),
          ...holds.openConversations(),
        ]),
      forget: (conversation) => this.jobs.forget(conversation),
      prune: [(before, limit) => this.outbox.pruneSettled(before, limit), (before, limit) => this.tools.pruneDone(before, limit)],
    });
    this.audits = new AuditOutbox(this.sql, this.effects, (conversation) => this.store.get(conversation) !== undefined);
    this.leases = new Leases(this.sql, this.effects, this.store, holds, (conversation, text) => this.turns.note(this.store.get(conversation)!, text));
    this.scheduler = new Scheduler(
      ctx.storage,
      async () => {
        const route = this.identity.route();
        const advance = this.deletion.deletedAt() === null;
        if (route) await this.busyTime.measure({ part: "pass" }, async () => (await this.pass.run(route, advance), await this.retention.slice(route)), false);
        this.followers.tell();
      },
      () => [this.store.anyMarked() || this.approvals.hasWork() ? Date.now() : null, this.effects.nextDue(), this.leases.nextDue(), this.delegation.nextDue(), this.retention.nextDue()],
    );
    this.pass = new Pass({
      storage: ctx.storage,
      carriers: () => ({ couriers: countedNamespace(this.env, "Courier", this.env.COURIER), queue: this.env.EFFECT_QUEUE }),
      store: this.store,
      effects: this.effects,
      jobs: this.jobs,
      tools: this.tools,
      toolLists: this.toolLists,
      outbox: this.outbox,
      turns: this.turns,
      approvals: this.approvals,
      leases: this.leases,
      audits: this.audits,
      busyTime: this.busyTime,
      children: this.delegation,
      context: (route) => this.#passContext(route),
      dispatch: (route, row) => this.claims.dispatch(route, row),
    });
    this.claims = new Claims({
      storage: ctx.storage,
      env,
      effects: this.effects,
      jobs: this.jobs,
      turns: this.turns,
      outbox: this.outbox,
      typing: this.typing,
      tools: this.tools,
      approvals: this.approvals,
      toolLists: this.toolLists,
      leases: this.leases,
      audits: this.audits,
      busyTime: this.busyTime,
      wake: () => this.scheduler.wake(),
      drive: () => this.scheduler.drive(),
      context: (route) => this.#passContext(route),
      gateway: () => this.#gateway(),
    });
    this.deletion = new AgentDeletion({ storage: ctx.storage, store: this.store, turns: this.turns, approvals: this.approvals, effects: this.effects });
    this.scripts = new ScriptCalls(ctx.storage, this.store, this.tools, this.approvals.holds, this.sessions, () => this.scheduler.wake());
    this.inbound = new Inbound(this.store, this.turns, this.jobs, this.approvals, (conv, status) =>
      statusText({
        conv,
        status,
        openJobs: this.jobs.openCount(),
        pendingHolds: this.approvals.holds.pending().length,
        machines: this.leases.open(),
        today: { ...this.jobs.usageSince(conv.id, dayStart(Date.now())), busyMs: this.busyTime.ofConversationSince(conv.id, dayStart(Date.now())) },
        gateway: () => this.#gateway(),
        model: () => modelChoice(this.env, modelFrom(this.env, this.settings.get() ?? NO_SETTINGS)),
      }),
    );
  }

  // ---- RPC surface -------------------------------------------------------

  /**
   * A durable write (with the audit row of a change it makes, by `caller`
   * where /v1 sent it), then a pass starts (runtime/object/scheduler.ts).
   * Never waits for the model or a platform.
   */
  async submit(route: Route, event: ChatEvent, caller?: string): Promise<SubmitResult> {
    return this.#accept(route, event, () => {
      const result = this.inbound.accept(route, event);
      this.audits.record(route, event, result, caller);
      return result;
    });
  }

  /** `accept` runs in one transaction; with `event` accepted, a pass starts. */
  async #accept<T extends SubmitResult>(route: Route, event: Pick<ChatEvent, "conversation" | "user">, accept: () => T): Promise<T> {
    this.identity.claim(route);
    this.identity.checkBridge(route, event.user.platform);
    this.deletion.refuseIfDeleted(route);
    // Its first event registers the agent with its tenant's object, which gives it its settings (its one call there);
    // an event to an archived conversation brings its rows back from R2 first (runtime/store/archive.ts).
    if (this.settings.get() === null) this.settings.apply(await registerAgent(this.env, { ...route, platform: event.user.platform }));
    await this.retention.restore(route, event.conversation);
    const result = this.ctx.storage.transactionSync(accept);
    if (result.accepted) this.scheduler.wake();
    return result;
  }

  // ---- the feed and the Responses API (runtime/feed) ----

  /** The conversation's events after id `after`, oldest first (what a follower reads next). */
  async feed(route: Route, conversation: string, after: number): Promise<FeedPage | null> {
    if (!this.#answers(route)) return null;
    return this.retention.read(route, conversation, () => (this.store.get(conversation) ? feedAfter(this.sql, route, conversation, after) : null));
  }

  /**
   * A follow of a conversation (runtime/feed/followers.ts), the one request the
   * object takes by fetch: a WebSocket it sends each event to as it is written.
   */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") return new Response("a follow is a WebSocket upgrade", { status: 426 });
    const ask = followAsk.safeParse(Object.fromEntries(new URL(request.url).searchParams));
    if (!ask.success) return new Response(`invalid follow: ${ask.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`, { status: 400 });
    const { conversation, after, ...route } = ask.data;
    if (!this.#answers(route)) return new Response(`no agent ${route.agent} of tenant ${route.tenant}`, { status: 404 });
    return this.followers.accept(conversation, after);
  }

  // A follower's socket ended (its stream closed, or the connection broke): the runtime answers the
  // close itself (web_socket_auto_reply_to_close) and drops the socket; the object keeps nothing to forget.
  override async webSocketClose(): Promise<void> {}
  override async webSocketError(): Promise<void> {}

  /**
   * A Responses API call: its answers to held calls (each decided as a click
   * on its card, by `caller` in the trail), its outputs of the caller's
   * function calls (each the call's result, once), its message, and the
   * response waiting for the turn they go to, written together; an answer
   * that cannot be given refuses the whole call, nothing written, and so does
   * a message or output that leaves a function call without its output, or a
   * function tool named as one of the agent's. A retry of the call (its id)
   * writes nothing and reads the response.
   */
  async respond(route: Route, id: string, events: ResponseEvents, request: ResponseRequest, caller: string): Promise<ResponseState | ResponseRefusal | null> {
    if (this.#answers(route) && this.responses.find(id)) return this.response(route, id);
    const { conversation } = events;
    try {
      await this.#accept(route, events, () => {
        this.#ownToolNamed(request.tools ?? []);
        const after = this.responses.mark(conversation);
        let decided = false;
        for (const decision of events.decisions) {
          const hold = this.approvals.holds.get(decision.holdId);
          if (hold?.conversation !== conversation) throw new Refused(404, `no approval request "${decision.holdId}" in conversation "${conversation}"`);
          const result = this.inbound.accept(route, decision);
          if (!result.accepted) continue; // the same call sent twice at once: its first copy decides
          if (!result.decided) throw new Refused(hold.status === "pending" ? 403 : 409, `approval request "${decision.holdId}": ${result.notice}`);
          this.audits.record(route, decision, result, caller);
          decided = true;
        }
        for (const { callId, output } of events.outputs) {
          const answer = this.tools.answerCaller(conversation, callId, output);
          if (answer === "unknown") throw new Refused(404, `no function call "${callId}" in conversation "${conversation}"`);
          if (answer === "not waiting") throw new Refused(409, `function call "${callId}" is not waiting for output: it was given its output already, or its turn ended`);
        }
        // As OpenAI's: a function call the model made is answered before the conversation goes on.
        const unanswered = events.message || events.outputs.length > 0 ? this.tools.awaitingCaller(conversation)[0] : undefined;
        if (unanswered) throw new Refused(400, `No tool output found for function call ${unanswered}.`);
        const given = decided || events.outputs.length > 0;
        const result = events.message ? this.inbound.accept(route, responseMessage(this.store.get(conversation), events.message)) : { accepted: given, conversation, status: "idle" as const };
        if (result.accepted) this.responses.record(id, this.store.get(conversation)!, after, request, events.message !== undefined);
        return result;
      });
    } catch (err) {
      if (err instanceof Refused) return { refused: { status: err.status, message: err.message } };
      throw err;
    }
    return this.response(route, id);
  }

  /** A caller's function tool may not take the name of one of the agent's own (a mount's tool, `delegate`). */
  #ownToolNamed(tools: FunctionTool[]): void {
    if (tools.length === 0) return;
    const own = new Set([...this.#gateway().tools().map((tool) => tool.name), DELEGATE]);
    const clash = tools.filter((tool) => own.has(tool.name)).map((tool) => tool.name);
    if (clash.length > 0) throw new Refused(400, `tools: ${clash.join(", ")} ${clash.length === 1 ? "is the name of one" : "are names"} of the agent's own tools; name the function otherwise`);
  }

  async response(route: Route, id: string): Promise<ResponseState | null> {
    const row = this.#answers(route) ? this.responses.find(id) : undefined;
    return row ? this.retention.read(route, row.conversation, () => this.responses.state(route, row, this.jobs.usageOfTurn(row.conversation, row.turn))) : null;
  }

  /** Stops the turn a response waits for, if it still runs (as `stop` does); the response then reads cancelled. */
  async cancelResponse(route: Route, id: string, user: ChatUser): Promise<ResponseState | null> {
    const row = this.#answers(route) ? this.responses.find(id) : undefined;
    const conv = row && this.store.get(row.conversation);
    if (conv?.status === "running" && conv.turn === row!.turn) await this.submit(route, { id: `cancel:${id}`, kind: "interrupt", conversation: conv.id, user });
    return this.response(route, id);
  }

  async conversation(route: Route, id: string): Promise<ConversationView | null> {
    if (!this.#answers(route)) return null;
    return this.retention.read(route, id, () => {
      const conv = this.store.get(id);
      if (!conv) return null;
      const busyByTurn = this.busyTime.ofConversation(id);
      return {
        id, status: this.inbound.statusOf(conv), turn: conv.turn, error: conv.error,
        usage: { inputTokens: conv.input_tokens, outputTokens: conv.output_tokens, cost: conv.cost, ...this.jobs.recentUsage(id, Date.now()) },
        busyMs: busyByTurn.reduce((sum, t) => sum + t.busyMs, 0),
        busyByTurn,
        transcript: transcript(this.store.log(id)),
        holds: this.approvals.holds.ofConversation(id).map((hold) => cardFor(hold, route.tenant, route.agent)),
        family: this.delegation.family(id),
      };
    });
  }

  /** Conversations whose id starts with `prefix` (a bridge finds a channel's threads this way; a child run is none). */
  async conversations(route: Route, prefix = ""): Promise<{ id: string; status: ConversationStatus; updatedAt: number }[]> {
    if (!this.#answers(route)) return [];
    return this.store.list(prefix, 100).filter((conv) => !this.delegation.isChild(conv)).map((conv) => ({ id: conv.id, status: this.inbound.statusOf(conv), updatedAt: conv.updated_at }));
  }

  // ---- the effect protocol (runtime/object/claims.ts): a courier claims an effect, performs it, reports ----

  async claim(route: Route, kind: EffectKind, id: string): Promise<EffectWork[EffectKind] | null> {
    this.identity.claim(route);
    return this.claims.claim(route, kind, id);
  }

  /** A model job's courier opened the message it streams the reply to (or its ref changed). */
  async progress(route: Route, jobId: string, shown: StreamShown): Promise<void> {
    this.identity.claim(route);
    this.claims.progress(jobId, shown);
  }

  async report(route: Route, kind: EffectKind, id: string, outcome: EffectReport[EffectKind]): Promise<ReportAnswer> {
    this.identity.claim(route);
    return this.claims.report(route, kind, id, outcome);
  }

  // Code mode, the same verbs: the courier running a script claims each of its
  // tool calls (runtime/tools/script-calls.ts) and reports those it was handed to perform.

  /** A script's call, decided with the mounts as they are now: its answer, or the work to perform. */
  async claimScriptCall(route: Route, call: ScriptCall): Promise<ScriptAnswer> {
    this.identity.claim(route);
    const pass = this.#passContext(route);
    const answer = await this.scripts.call(pass, call);
    if (answer.kind === "perform") this.leases.claimed(pass, answer.work);
    return answer;
  }

  /** The result of a script's call the courier performed: what the journal now holds. */
  async reportScriptCall(route: Route, key: string, report: ToolReport): Promise<ToolOutput> {
    this.identity.claim(route);
    return this.ctx.storage.transactionSync(() => {
      if (report.lease) this.leases.reported(report.alias, report.lease);
      return this.scripts.report(key, report);
    });
  }

  /** A bridge's word that nothing can be delivered to `platform` any more (its app was uninstalled): the unsent rows fail. */
  async dropDeliveries(route: Route, platform: Platform, reason: string): Promise<number> {
    if (!this.identity.owns(route)) return 0;
    return this.ctx.storage.transactionSync(() => this.outbox.failPending(platform, reason));
  }

  override async alarm(): Promise<void> {
    await this.scheduler.drive();
  }

  // ---- RPC for watchers (the console): queries live in runtime/object/views.ts ----

  /** Conversations newest first, a page at a time, optionally matching a search. */
  async conversationList(route: Route, query: ConversationQuery): Promise<ConversationPage> {
    if (!this.#answers(route)) return { conversations: [] };
    return conversationPage(this.sql, this.jobs, this.approvals.holds, query);
  }

  /** Holds waiting for a decision, oldest first; with `decider`, only those that person may decide. */
  async pendingHolds(route: Route, decider?: Person): Promise<PendingApproval[]> {
    if (!this.#answers(route)) return [];
    return pendingApprovals(this.approvals.holds, route, decider && ((hold) => this.approvals.mayDecide(route, hold, decider)));
  }

  /** Changes whenever what a watcher of the conversation (or, without one, the agent) sees changes. */
  async changes(route: Route, conversation?: string): Promise<string> {
    if (!this.identity.owns(route)) return "";
    return changeMark(this.sql, this.jobs, this.approvals.holds, conversation);
  }

  /** The control plane's push of this agent's settings after a change (runtime/control/settings.ts). */
  async applySettings(route: Route, settings: SettingsText): Promise<void> {
    this.identity.claim(route);
    // A new mount's tool list is work no due time shows: asked for at once, not at the next message.
    if (this.settings.apply(settings) && this.#listsDue()) this.scheduler.kick();
  }

  /** The Agents API's DELETE (runtime/object/deletion.ts): stops, settles, tells, and takes no further step. */
  async deleteAgent(route: Route): Promise<DeletionReport> {
    this.identity.claim(route);
    const report = this.deletion.delete(route);
    this.scheduler.wake();
    // A deleted agent answers no follow: its followers hear how their turns ended, then the end.
    this.followers.tell();
    this.followers.end("the agent was deleted");
    return report;
  }

  /** Deletes a settled conversation's rows and archive; a running one is left ("busy"). */
  async deleteConversation(route: Route, id: string): Promise<"deleted" | "busy" | "missing"> {
    if (!this.#answers(route)) return "missing";
    const outcome = await this.retention.forget(route, id);
    if (outcome === "deleted") this.followers.end("the conversation was deleted", id);
    return outcome;
  }

  /** Reads answer only the agent's own route, and nothing once it is deleted. */
  #answers(route: Route): boolean {
    return this.identity.owns(route) && this.deletion.deletedAt() === null;
  }

  // ---- what a pass knows (runtime/object/pass.ts runs it) -------------------------------

  /** Mounts and model as they are now, from the agent's own copy of its settings. */
  #passContext(route: Route): PassContext {
    const settings = this.settings.get() ?? NO_SETTINGS;
    const pick = modelFrom(this.env, settings);
    const model = modelChoice(this.env, pick);
    const gateway = this.#gateway(settings);
    // Read only where a machine can be mounted: a bad value fails those agents' turns, naming the variable.
    return { route, gateway, pick, model, systemPrompt: systemPrompt(this.env, route, model), machineIdleMs: gateway.holdsLeases() ? machineIdleMs(this.env) : null };
  }

  /** A mount whose tool list should be fetched now; a configuration that cannot work is the next pass's to report. */
  #listsDue(): boolean {
    try {
      return this.#gateway().toolListsDue(Date.now()).length > 0;
    } catch {
      return true;
    }
  }

  /**
   * Plugins that run here take no secret: a courier resolves a mount's own. The
   * platform's (Worker secrets, read with no call) are known here only so a
   * held call's arguments are redacted on its card; a tenant's are never opened here.
   */
  #gateway(settings = this.settings.get() ?? NO_SETTINGS): Gateway {
    return new Gateway(mountsFrom(this.env, settings), this.deps.plugins, {
      secret: (mount) => platformSecret(this.env, { name: mount.secret_ref!, setBy: mount.set_by, what: `mount "${mount.alias}"` }),
      session: (alias) => this.sessions.state(alias),
    });
  }
}

// Every method on the prototype is a call into the object (its helpers are #private, off the prototype):
// each ends by telling followers what it wrote, and is measured with that telling.
tellFollowersAfterEachCall(AgentObject.prototype);
measureHandlers(AgentObject.prototype, AGENT_HANDLERS);

/** A create the object refuses (an answer that cannot be given, …): thrown inside the transaction, so nothing of the call is written. */
class Refused extends Error {
  constructor(
    readonly status: ResponseRefusal["refused"]["status"],
    message: string,
  ) {
    super(message);
  }
}
