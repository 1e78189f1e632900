// A mount's calls as a courier makes them: a tool call, a tool list fetched,
// a leased mount's machine ended. Each gets a gateway of that one mount, with
// its secret resolved here (never in the agent's object: the tenant's own
// store, or the environment where the platform allows) and redacted from what
// comes back. What a call held for a time (a machine it ended) goes to the
// ledger through `metered`, never into the result.
import { Gateway, type CallScope, type GatewayDeps, type HeldSpan, type Mount, type Plugin, type SecretLookup, type SessionState } from "../../plugins/index.ts";
import { resolveSecret } from "../control/index.ts";
import type { Route } from "../chat.ts";
import { sessionCopy, type LeaseReport, type LeaseUse, type LeaseWork, type ToolReport, type ToolWork, type MountReport, type MountWork } from "../tools/index.ts";
import type { ScriptCaller } from "./script-caller.ts";
import { storeImage } from "../store/index.ts";
import { fromBase64 } from "../../lib/base64.ts";

export class MountCalls {
  constructor(
    private readonly env: Env,
    private readonly plugins: readonly Plugin[],
    /** Counts what a call or a lease's end held for a time (the courier keeps it until the ledgers have it). */
    private readonly metered: (route: Route, held: HeldSpan[]) => Promise<void>,
  ) {}

  /** The gateway, here: the mount's secret is resolved and redacted in the courier, never in the object. */
  async runTool(work: ToolWork, scripts?: ScriptCaller): Promise<ToolReport> {
    const session = sessionCopy(work.session);
    const caller = scripts && ((scope: CallScope) => scripts.forScript(scope.callKey));
    const gateway = await this.gateway(work.scope.tenant, work.mount, session.state, caller);
    const { metered, ...result } = await gateway.call(work.tool, work.args, work.scope, { replay: work.replay, approved: work.approved });
    if (metered) await this.metered(work.scope, metered);
    // Its images go to R2 here: the report, the journal and the transcript carry their references (an MCP screenshot can be megabytes).
    if (result.images) result.images = await Promise.all(result.images.map((image) => storeImage(this.env.LARGE_VALUES, work.scope, fromBase64(image.data), image.mimeType)));
    const act = leaseAct(gateway.leaseOf(work.tool), result.isError === true);
    return { result, alias: work.mount.alias, session: session.changed(), ...(act ? { lease: { conversation: work.scope.conversation, act } } : {}) };
  }

  /** Ends what a leased mount's calls left running in the conversation (a machine: its kept folders saved, then destroyed). */
  async endLease(route: Route, work: LeaseWork): Promise<LeaseReport> {
    try {
      const held = await (await this.gateway(route.tenant, work.mount, sessionCopy({}).state)).retire(work.mount.alias, { tenant: route.tenant, agent: route.agent, conversation: work.conversation });
      await this.metered(route, held);
      return {};
    } catch (err) {
      return { error: err instanceof Error ? err.message : String(err) };
    }
  }

  async fetchTools(route: Route, work: MountWork): Promise<MountReport> {
    const session = sessionCopy(work.session);
    await (await this.gateway(route.tenant, work.mount, session.state)).fetchTools(work.mount.alias, { tenant: route.tenant, agent: route.agent });
    return { session: session.changed() };
  }

  private async gateway(tenant: string, mount: Mount, session: SessionState, caller?: GatewayDeps["caller"]): Promise<Gateway> {
    const found: SecretLookup | undefined = mount.secret_ref ? await resolveSecret(this.env, tenant, { name: mount.secret_ref, setBy: mount.set_by, what: `mount "${mount.alias}"` }) : undefined;
    return new Gateway([mount], this.plugins, { secret: () => found ?? { missing: `mount "${mount.alias}" names no secret` }, session: () => session, caller });
  }
}

/** How a leased mount's call bears on its lease: a release or postpone that failed did neither (a failed release may have left the machine: a use). */
function leaseAct(lease: { ends: boolean; postpones: boolean } | undefined, failed: boolean): LeaseUse["act"] | undefined {
  if (!lease) return undefined;
  if (lease.postpones) return failed ? undefined : "postpone";
  return lease.ends && !failed ? "end" : "use";
}
