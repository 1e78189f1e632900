// The daily Cron Trigger (wrangler.jsonc, triggers.crons): every tenant's
// ledger and the platform's fold their hours older than FOLD_AFTER_MS into
// days (runtime/metering/ledger.ts). A ledger that fails is logged and the
// others go on; it folds at the next run, as nothing is lost by waiting.
import { listTenants } from "../control/index.ts";
import { ledgerStub } from "../metering/index.ts";

/** Folds every ledger's old hours into days; the number of hour rows folded. */
export async function foldLedgers(env: Env, now: number): Promise<number> {
  const tenants = [...(await listTenants(env)).map((t) => t.tenant), undefined];
  const results = await Promise.allSettled(tenants.map((tenant) => ledgerStub(env, tenant).fold(now)));
  let folded = 0;
  results.forEach((result, i) => {
    if (result.status === "fulfilled") folded += result.value;
    else console.error(`the ledger of ${tenants[i] === undefined ? "the platform" : `tenant ${tenants[i]}`} could not fold its hours`, result.reason);
  });
  return folded;
}
