// Who an agent object is: it records its (tenant, agent) on first use and
// refuses any other (invariant 4), and the bridge of its first chat event, to
// which its tenant then belongs. Its schema is created by that first write, so
// a read of an object never used writes nothing. A deploy whose migration
// fails leaves the object serving nothing: every call into it throws the
// MigrationError (a 503 at the Worker) and no pass runs, until a deploy fixes it.
// The migrations are the object's (runtime/object/schema.ts): it hands them in.
import type { Platform, Route } from "../chat.ts";
import { MigrationError, schemaVersion } from "../../lib/migrations.ts";

export class IdentityError extends Error {
  override name = "IdentityError";
}

/** The runtime's own ways in, which own no tenant; every other platform is a bridge's, and owns the tenants it first brought. */
const OWN_SURFACES: ReadonlySet<Platform> = new Set(["api", "console"]);

export class Identity {
  /** No schema yet: the first write (claim) creates it. */
  private fresh: boolean;
  /** This deploy's migrations failed on the object's schema (rolled back): it serves nothing. */
  private failure: MigrationError | null = null;
  /** The route and bridge once read or written: they never change, and every call asks for the route. */
  private known: Route | null = null;
  private bridge: string | undefined;

  constructor(
    private readonly storage: DurableObjectStorage,
    /** Brings the schema to this deploy's; throws MigrationError, all rolled back. */
    private readonly migrate: (storage: DurableObjectStorage) => void,
  ) {
    // Asked of sqlite_master: a read of an object never written writes nothing.
    this.fresh = schemaVersion(storage.sql) === 0;
    if (this.fresh) return;
    try {
      migrate(storage);
    } catch (err) {
      if (!(err instanceof MigrationError)) throw err;
      console.error(err.message);
      this.failure = err;
    }
  }

  /** Whether the object has its schema (it was written once), at this deploy's version. */
  ready(): boolean {
    return !this.fresh && this.failure === null;
  }

  /** Records the route on first use; refuses any other. */
  claim(route: Route): void {
    this.serving();
    if (this.fresh) {
      this.migrate(this.storage);
      this.fresh = false;
    }
    const known = this.route();
    if (!known) {
      this.storage.sql.exec("INSERT INTO meta (key, value) VALUES ('tenant', ?), ('agent', ?)", route.tenant, route.agent);
      this.known = { tenant: route.tenant, agent: route.agent };
    } else if (known.tenant !== route.tenant || known.agent !== route.agent) {
      throw new IdentityError(
        `this object belongs to tenant "${known.tenant}" agent "${known.agent}"; refused a request for tenant "${route.tenant}" agent "${route.agent}"`,
      );
    }
  }

  /**
   * Tenants are namespaced by the bridge that owns them: the first chat event
   * records its bridge, and no other bridge may address the agent's
   * conversations afterwards (a webhook tenant named like a Slack workspace
   * cannot reach that workspace's threads). The operator's own ways in (the
   * Agents API, the console) may address any.
   */
  checkBridge(route: Route, platform: Platform): void {
    if (OWN_SURFACES.has(platform)) return;
    const owner = (this.bridge ??= this.storage.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'bridge'").toArray()[0]?.value);
    if (owner === undefined) {
      this.storage.sql.exec("INSERT INTO meta (key, value) VALUES ('bridge', ?)", platform);
      this.bridge = platform;
    } else if (owner !== platform) {
      throw new IdentityError(`tenant "${route.tenant}" belongs to the ${owner} bridge; a ${platform} event cannot address it`);
    }
  }

  /** A read's check: refuses another identity as claim does, but an object with none yet has nothing to show and records nothing. */
  owns(route: Route): boolean {
    const own = this.route();
    if (own === null) return false;
    if (own.tenant !== route.tenant || own.agent !== route.agent) this.claim(route); // throws IdentityError
    return true;
  }

  route(): Route | null {
    this.serving();
    if (this.fresh) return null;
    if (this.known) return this.known;
    const rows = this.storage.sql.exec<{ key: string; value: string }>("SELECT key, value FROM meta WHERE key IN ('tenant', 'agent')").toArray();
    const tenant = rows.find((r) => r.key === "tenant")?.value;
    const agent = rows.find((r) => r.key === "agent")?.value;
    if (tenant !== undefined && agent !== undefined) this.known = { tenant, agent };
    return this.known;
  }

  /** Throws the failed migration: the object takes no step on a schema it could not bring forward. */
  private serving(): void {
    if (this.failure) throw this.failure;
  }
}
