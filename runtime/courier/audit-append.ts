// An audit effect's work: the row goes to the tenant's trail (its own object)
// under its key, so a courier that appends it twice (a crash before its
// report) makes one row.
import { appendTenantAudit } from "../control/index.ts";
import type { AuditWork } from "../object/index.ts";

export async function appendAudit(env: Env, work: AuditWork): Promise<null> {
  await appendTenantAudit(env, work);
  return null;
}
