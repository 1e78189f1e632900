// The gate of one key: a small Durable Object per (provider, credential),
// shared by every agent of the deployment that calls the provider with that
// key (a tenant's own key has its own). A rate limit is the key's, not one
// conversation's: when the provider says "not before T", no call is made
// with the key until T. Then one call goes first (the probe); the others
// wait for its answer, so a key that is still limited is asked once per
// window, never by every waiting conversation at once. The gate answers at
// once and never holds a caller: whoever was told to wait comes back later
// (the agent's object schedules the job again). An isolate trusts its "go"
// for a moment rather than asking before every call (open-gates.ts).
import { DurableObject } from "cloudflare:workers";
import { type Migration, runMigrations } from "../../lib/migrations.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

/** May a call go now: yes (`probe`: it is the first after a wait, and says how it went), or not before `until`. */
export type Admission = { go: true; probe?: string } | { go: false; until: number };

/** A probe that never says how it went (its courier died) stops holding the others back after this. */
const PROBE_LEASE_MS = 30_000;
/** While a probe is out, the others ask again this soon. */
const PROBE_POLL_MS = 1_000;
/** A limit with no word on when to come back waits MODEL_RETRY_BASE_SECONDS, doubling, up to this. */
const MAX_BACKOFF_SECONDS = 300;

/** Append-only (lib/migrations.ts): the first adopts the table releases before versioning created on every wake. */
const MIGRATIONS: readonly Migration[] = [
  {
    name: "gate",
    sql: "CREATE TABLE IF NOT EXISTS gate (id INTEGER PRIMARY KEY CHECK (id = 1), closed_until INTEGER NOT NULL, refusals INTEGER NOT NULL, probe TEXT, probe_until INTEGER NOT NULL)",
  },
];

type GateRow = {
  /** No call before this (ms since the epoch). */
  closed_until: number;
  /** Rate limits since the key last answered: 0 means open. */
  refusals: number;
  probe: string | null;
  probe_until: number;
};

export class ProviderGate extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    runMigrations(ctx.storage, MIGRATIONS);
  }

  async admit(): Promise<Admission> {
    const gate = this.row();
    const now = Date.now();
    if (!gate || gate.refusals === 0) return { go: true };
    if (now < gate.closed_until) return { go: false, until: gate.closed_until };
    if (gate.probe && now < gate.probe_until) return { go: false, until: Math.min(gate.probe_until, now + PROBE_POLL_MS) };
    const probe = crypto.randomUUID();
    this.sql.exec("UPDATE gate SET probe = ?, probe_until = ? WHERE id = 1", probe, now + PROBE_LEASE_MS);
    return { go: true, probe };
  }

  /** Whether calls may go with no probe: what an isolate's view of the gate is refreshed by (it takes no probe). */
  async isOpen(): Promise<boolean> {
    const gate = this.row();
    return !gate || gate.refusals === 0;
  }

  /**
   * A call with the key was refused for its rate limit: no call before the
   * time the provider gave (or, with no word, the backoff), and never earlier
   * than a window already announced. Returns when calls may go again.
   */
  async limited(probe: string | undefined, waitSeconds: number | undefined, backoffBaseSeconds: number): Promise<number> {
    const gate = this.row();
    // Refusals count waits, not calls: those of calls already under way when the wait began add none.
    const counts = !gate || gate.refusals === 0 || (probe !== undefined && gate.probe === probe);
    const refusals = (gate?.refusals ?? 0) + (counts ? 1 : 0);
    const seconds = waitSeconds ?? Math.min(MAX_BACKOFF_SECONDS, backoffBaseSeconds * 2 ** (refusals - 1));
    const until = Math.max(gate?.closed_until ?? 0, Date.now() + seconds * 1000);
    // The probe's answer is in; a call that left before the wait was known leaves any probe alone.
    const keepProbe = gate?.probe && gate.probe !== probe;
    this.sql.exec(
      "INSERT OR REPLACE INTO gate (id, closed_until, refusals, probe, probe_until) VALUES (1, ?, ?, ?, ?)",
      until,
      refusals,
      keepProbe ? gate.probe : null,
      keepProbe ? gate.probe_until : 0,
    );
    return until;
  }

  /** The probe was answered (not with a rate limit): the key is open to every call again. */
  async answered(probe: string): Promise<void> {
    if (this.row()?.probe === probe) this.sql.exec("DELETE FROM gate");
  }

  private row(): GateRow | undefined {
    return this.sql.exec<GateRow>("SELECT closed_until, refusals, probe, probe_until FROM gate").toArray()[0];
  }
}

/** The name of a provider key's gate: it carries a digest of the key, never the key. */
export async function gateName(providerId: string, key: string): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(key)));
  const hex = Array.from(digest.slice(0, 16), (b) => b.toString(16).padStart(2, "0")).join("");
  return `${providerId}:${hex}`;
}

export function gateStub(env: Env, name: string): DurableObjectStub<ProviderGate> {
  const namespace = countedNamespace(env, "ProviderGate", env.PROVIDER_GATE as DurableObjectNamespace<ProviderGate>);
  return namespace.get(namespace.idFromName(name));
}
