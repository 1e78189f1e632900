// Changing a tenant's or an agent's setting from outside the agent (the Agents
// API, the console), and reading one back as the agent will use it.
import { HttpError } from "../../lib/http.ts";
import { agentSettings, parseSettings, secondMessageFrom, tenantStub, type SettingAudit, type SettingKind, type SettingsText } from "../control/index.ts";
import { agentStub } from "../object/index.ts";
import { forgetReading, ledgerStub, type TenantLimit } from "../metering/index.ts";
import { DEFAULT_SECOND_MESSAGE, type SecondMessage } from "../turns/index.ts";
import type { Route } from "../chat.ts";

/**
 * Stores a tenant's or an agent's setting (null removes it) in the tenant's
 * object, with its trail row (`audit`) in the same transaction, and pushes
 * each affected agent its new copy before answering, so the next pass of every
 * one of them already runs under it. An agent that could not be reached is
 * named: the request may be repeated.
 */
export async function changeSetting(env: Env, kind: SettingKind, route: Route, scope: "tenant" | "agent", value: unknown, audit?: SettingAudit): Promise<{ agents: number }> {
  const targets = await tenantStub(env, route.tenant)
    .changeSetting(route.tenant, kind, scope === "agent" ? route.agent : null, value, audit)
    .catch((err: unknown) => {
      // One transaction in the tenant's object: nothing was written (a PUT or DELETE may be repeated as it is).
      console.error("settings: a change could not be saved", kind, err);
      throw new HttpError(503, "the setting could not be saved with its audit row; nothing changed, repeat the request");
    });
  const missed = await push(env, targets);
  if (missed.length > 0) throw new HttpError(503, `saved, but ${missed.length} agent(s) could not be told yet (${missed.slice(0, 5).join(", ")}); repeat the request`);
  return { agents: targets.length };
}

/** Pushes each agent its copy; returns the agents that could not be told. */
async function push(env: Env, targets: { route: Route; settings: SettingsText }[]): Promise<string[]> {
  const pushed = await Promise.allSettled(targets.map((t) => agentStub(env, t.route).applySettings(t.route, t.settings)));
  return targets.filter((_, i) => pushed[i]!.status === "rejected").map((t) => t.route.agent);
}

/** The agent's second-message strategy: the one in effect, and what its tenant and the agent itself set. */
export async function secondMessageOf(
  env: Env,
  route: Route,
): Promise<{ effective: SecondMessage; default: SecondMessage; tenant: SecondMessage | null; agent: SecondMessage | null }> {
  const settings = parseSettings(await agentSettings(env, route));
  return { effective: secondMessageFrom(settings), default: DEFAULT_SECOND_MESSAGE, ...settings.secondMessage };
}

/** Sets (or with null, removes) a tenant's own daily spend limit; returns the one it replaced. */
export async function setTenantLimit(env: Env, tenant: string, limit: TenantLimit | null): Promise<TenantLimit | null> {
  const ledger = ledgerStub(env, tenant);
  const before = (await ledger.reading()).limit;
  await ledger.setLimit(limit);
  forgetReading(tenant);
  return before;
}
