// The platform's token (ADMIN_TOKEN), guarding the Agents API and the console, read here.
import { secretNamed } from "../../lib/config.ts";
import { HttpError } from "../../lib/http.ts";

/** The token guarding /v1 and the console; a deployment without one refuses rather than opens. */
export function adminToken(env: Env): string {
  const token = secretNamed(env, "ADMIN_TOKEN");
  if (!token) throw new HttpError(503, "ADMIN_TOKEN is not configured on this deployment");
  return token;
}
