// Per-tenant and per-agent settings (mount overrides, the model choice, the
// strategy for a second message while a turn runs): kept in the tenant's own
// object (tenant-settings.ts), and copied into each agent's own object so a
// pass reads them from its own SQLite, never from another object. The copy is
// taken once, when the agent first takes an event (registering it with its
// tenant's object in the same call), and pushed to every affected agent
// whenever a setting changes, before the admin API answers: a `deny` set on a
// mount takes effect before the next call it governs. Versions are per tenant
// and only ever grow, so a late push never undoes a newer one.
import * as z from "zod";
import { ConfigError } from "../../lib/config.ts";
import type { Mount } from "../../plugins/index.ts";
import { deploymentModel, modelPickSchema, type ModelPick } from "../models/index.ts";
import { DEFAULT_SECOND_MESSAGE, secondMessageSchema, type SecondMessage } from "../turns/index.ts";
import { configuredMounts, mountList } from "./config.ts";

/** What can be set per tenant and per agent, by its kind (an older release's control-plane namespace). */
export const SETTING_KINDS = {
  mounts: mountList,
  models: modelPickSchema,
  secondMessage: secondMessageSchema,
} as const;
export type SettingKind = keyof typeof SETTING_KINDS;

/**
 * One agent's view of its settings: the tenant's and its own. It travels
 * between objects as JSON text (`SettingsText`) and is parsed, never trusted,
 * where it is used.
 */
export interface AgentSettings {
  version: number;
  mounts: { tenant: Mount[] | null; agent: Mount[] | null };
  models: { tenant: ModelPick | null; agent: ModelPick | null };
  secondMessage: { tenant: SecondMessage | null; agent: SecondMessage | null };
}

export type SettingsText = string;

/** `MOUNTS`, then the tenant's overrides, then the agent's: a later mount with the same alias replaces an earlier one. */
export function mountsFrom(env: Env, settings: AgentSettings): Mount[] {
  const byAlias = new Map<string, Mount>();
  const deployment = configuredMounts(env).map((mount): Mount => ({ ...mount, set_by: "platform" }));
  for (const list of [deployment, settings.mounts.tenant ?? [], settings.mounts.agent ?? []]) {
    for (const mount of list) byAlias.set(mount.alias, mount);
  }
  return [...byAlias.values()];
}

/** The agent's choice, else its tenant's, else the deployment's: the most specific wins. */
export function modelFrom(env: Env, settings: AgentSettings): ModelPick {
  return settings.models.agent ?? settings.models.tenant ?? deploymentModel(env);
}

/** The agent's strategy, else its tenant's, else `steer`. */
export function secondMessageFrom(settings: AgentSettings): SecondMessage {
  return settings.secondMessage.agent ?? settings.secondMessage.tenant ?? DEFAULT_SECOND_MESSAGE;
}

const META_KEY = "settings";

const settingsSchema = z.object({
  version: z.number(),
  mounts: z.object({ tenant: mountList.nullable(), agent: mountList.nullable() }),
  models: z.object({ tenant: modelPickSchema.nullable(), agent: modelPickSchema.nullable() }),
  // Copies taken before the strategy existed have none: nothing was set.
  secondMessage: z.object({ tenant: secondMessageSchema.nullable(), agent: secondMessageSchema.nullable() }).default({ tenant: null, agent: null }),
});

export function parseSettings(text: SettingsText): AgentSettings {
  const parsed = settingsSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new ConfigError(`stored settings are invalid: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/** The agent object's copy, in its meta table. */
export class SettingsCopy {
  constructor(private readonly sql: SqlStorage) {}

  /** Null until the agent first takes an event. */
  get(): AgentSettings | null {
    const row = this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = ?", META_KEY).toArray()[0];
    return row ? parseSettings(row.value) : null;
  }

  /** Keeps `text` unless the copy is already newer; returns whether it was taken. */
  apply(text: SettingsText): boolean {
    const settings = parseSettings(text);
    const current = this.get();
    if (current && current.version > settings.version) return false;
    this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", META_KEY, JSON.stringify(settings));
    return true;
  }
}

/** Settings of an agent with nothing set anywhere. */
export const NO_SETTINGS: AgentSettings = {
  version: 0,
  mounts: { tenant: null, agent: null },
  models: { tenant: null, agent: null },
  secondMessage: { tenant: null, agent: null },
};
