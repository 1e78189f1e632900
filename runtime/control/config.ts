// The deployment's mounts (MOUNTS), parsed here; tenants and agents add their
// own through the Agents API (runtime/control/settings.ts).
import * as z from "zod";
import { parseJsonVar } from "../../lib/config.ts";
import { mountSchema, type Mount } from "../../plugins/index.ts";

export const mountList = z.array(mountSchema);

/** MOUNTS: a JSON array of mounts, every agent's. */
export function configuredMounts(env: Env): Mount[] {
  return parseJsonVar("MOUNTS", env.MOUNTS, mountList, "[]");
}
