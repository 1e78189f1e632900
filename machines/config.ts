// The machine backend's configuration, parsed with zod; a bad value is
// reported by the variable's name.
import * as z from "zod";
import { ConfigError, secretNamed } from "../lib/config.ts";
import { isHttpsOrLoopback } from "../lib/http.ts";

/** Which backend runs machines (MACHINE_BACKEND): `cloudflare` (Containers), `local` (the machine host), `none`. */
export type MachineBackendKind = "cloudflare" | "local" | "none";

const backendKind = z.enum(["cloudflare", "local", "none"]);
const hostUrl = z.string().refine((u) => URL.canParse(u) && isHttpsOrLoopback(new URL(u)), "must be an http URL on loopback (or https)");

function parsed<T>(name: string, raw: string | undefined, schema: z.ZodType<T>): T {
  const result = schema.safeParse(raw);
  if (!result.success) throw new ConfigError(`${name} is invalid: ${z.prettifyError(result.error)}`);
  return result.data;
}

export function machineBackendKind(env: Env): MachineBackendKind {
  return parsed("MACHINE_BACKEND", env.MACHINE_BACKEND?.trim() || "none", backendKind);
}

/** Where the local machine host listens (MACHINE_HOST_URL) and the secret it wants (MACHINE_HOST_TOKEN). */
export function machineHost(env: Env): { url: string; token: string } {
  const url = parsed("MACHINE_HOST_URL", env.MACHINE_HOST_URL?.trim() || "http://127.0.0.1:8789", hostUrl).replace(/\/+$/, "");
  const token = secretNamed(env, "MACHINE_HOST_TOKEN");
  if (!token) throw new ConfigError("MACHINE_HOST_TOKEN is not set: the local machine host needs it (npm start writes one into .dev.vars)");
  return { url, token };
}
