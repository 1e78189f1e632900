// Changing a tenant's or an agent's setting from outside the agent (the Agents
// API, the console), and reading one back as the agent will use it.
import { HttpError } from "../../lib/http.ts";
import { recordChange } from "../access/index.ts";
import { controlPlane, parseSettings, secondMessageFrom, type SettingAudit, type SettingKind } from "../control/index.ts";
import { agentStub } from "../object/index.ts";
import { forgetReading, ledgerStub, type TenantLimit } from "../metering/index.ts";
import { DEFAULT_SECOND_MESSAGE, type SecondMessage } from "../turns/index.ts";
import type { Route } from "../chat.ts";

/**
 * Stores a tenant's or an agent's setting (null removes it) and pushes each
 * affected agent its new copy before answering, so the next pass of every one
 * of them already runs under it. An agent that could not be reached is named:
 * the request may be repeated. With `audit`, its trail row (the value before
 * read with the change) is appended to the tenant's trail right after the
 * change, as a key's is: the settings are the control plane's, the trail the
 * tenant's own object's.
 */
export async function changeSetting(env: Env, kind: SettingKind, route: Route, scope: "tenant" | "agent", value: unknown, audit?: SettingAudit): Promise<{ agents: number }> {
  const { before, targets } = await controlPlane(env)
    .changeSetting(kind, route, scope, value)
    .catch((err: unknown) => {
      // Nothing was written: a PUT or DELETE may be repeated as it is.
      console.error("settings: a change could not be saved", kind, err);
      throw new HttpError(503, "the setting could not be saved; nothing changed, repeat the request");
    });
  if (audit) await recordChange(env, { tenant: route.tenant, ...audit, before: before === null ? null : (JSON.parse(before) as unknown) });
  const pushed = await Promise.allSettled(targets.map((t) => agentStub(env, t.route).applySettings(t.route, t.settings)));
  const missed = targets.filter((_, i) => pushed[i]!.status === "rejected").map((t) => t.route.agent);
  if (missed.length > 0) throw new HttpError(503, `saved, but ${missed.length} agent(s) could not be told yet (${missed.slice(0, 5).join(", ")}); repeat the request`);
  return { agents: targets.length };
}

/** The agent's second-message strategy: the one in effect, and what its tenant and the agent itself set. */
export async function secondMessageOf(
  env: Env,
  route: Route,
): Promise<{ effective: SecondMessage; default: SecondMessage; tenant: SecondMessage | null; agent: SecondMessage | null }> {
  const settings = parseSettings(await controlPlane(env).settingsFor(route));
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
