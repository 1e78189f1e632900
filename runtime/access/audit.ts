// The audit trail: every change made through /v1 (and the console) is a row
// in the tenant's own object — who, when, what, before and after — appended,
// never edited. A route whose change lives there writes its row in the
// change's transaction (roles, bounds), or right after it (settings, keys,
// secrets), and says so with
// markAudited, as does one whose change the agent records with it (a stop, a
// compact, a decision: runtime/object/audit-outbox.ts). For the others the gate writes it once the route succeeded,
// reading the value before the change where it knows how (limits), and a new
// route gets a row naming its method and path.
import type { Context, Next } from "hono";
import * as z from "zod";
import { HttpError } from "../../lib/http.ts";
import { appendTenantAudit, tenantAudit, type AuditEntry } from "../control/index.ts";
import { ledgerStub } from "../metering/index.ts";
import type { AccessEnv, Caller } from "./types.ts";

/** What a write names itself in the trail, and how to read its value before; the row keeps the request's body as the value after. */
interface Change {
  action: string;
  before?: () => Promise<unknown>;
}

/** What a write to `path` (under /v1) changes, and how to read its value before. */
function changeOf(env: Env, method: string, path: string, scope: { tenant: string; agent?: string }): Change {
  const verb = method === "DELETE" ? "remove" : "set";
  if (/^\/tenants\/[^/]+\/limits$/.test(path)) return { action: `limits.${verb}`, before: async () => (await ledgerStub(env, scope.tenant).reading()).limit };
  if (/^\/webhook\/tenants\/[^/]+$/.test(path)) return { action: `webhook-callback.${verb}` };
  return { action: `${method} ${path.replace(/\/tenants\/[^/]+/, "/tenants/{tenant}")}` };
}

/** A body or a kept value as the JSON it holds; text that is not JSON (a value cut to fit) as itself. */
function parsedBody(text: string | null): unknown {
  if (text === null || text === "") return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Runs a write route and, when it succeeded, appends what it changed. */
export async function recordWrite(c: Context<AccessEnv>, scope: { tenant: string; agent?: string }, caller: Caller, next: Next): Promise<void> {
  const path = c.req.path.replace(/^\/v1(?=\/)/, "");
  const change = changeOf(c.env, c.req.method, path, scope);
  const before = change.before ? await change.before() : null;
  // A copy of the body, read only once the route accepted it (and so within its size limit).
  const copy = c.req.raw.clone();
  await next();
  if (c.error !== undefined || c.res.status >= 400 || c.get("audited")) return void (await copy.body?.cancel());
  await recordChange(c.env, { tenant: scope.tenant, actor: caller.actor, action: change.action, subject: path, before, after: parsedBody(await copy.text()) });
}

/** Appends one row; a trail that cannot be written is said, not hidden (the change itself is made). */
export async function recordChange(env: Env, entry: AuditEntry): Promise<void> {
  try {
    await appendTenantAudit(env, entry);
  } catch (err) {
    console.error("audit: a change could not be recorded", entry.action, err);
    throw new HttpError(503, "the change was made, but the audit trail could not record it");
  }
}

/** For a route that wrote its own row in the same transaction as its change. */
export function markAudited(c: Context<{ Bindings: Env }>): void {
  (c as unknown as Context<AccessEnv>).set("audited", true);
}

export const AUDIT_PAGE = 50;

export const auditQuery = z
  .object({
    limit: z.coerce.number().int().min(1).max(500).optional(),
    before: z.coerce.number().int().min(1).optional(),
  })
  .strict();

/** A page of a tenant's trail, newest first, and the cursor of the next. */
export async function readAudit(env: Env, tenant: string, query: z.infer<typeof auditQuery>) {
  const limit = query.limit ?? AUDIT_PAGE;
  const rows = await tenantAudit(env, tenant, limit, query.before);
  const entries = rows.map((row) => ({ ...row, at: new Date(row.at).toISOString(), before: parsedBody(row.before), after: parsedBody(row.after) }));
  return { entries, next: rows.length === limit ? rows.at(-1)!.seq : null };
}
