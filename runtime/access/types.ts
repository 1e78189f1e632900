// What the access room's parts share: who the caller is, and what the gate keeps on a request.
import type { KeyAccess } from "../control/index.ts";

export type Caller =
  /** The holder of ADMIN_TOKEN: the platform's operator, every tenant. */
  | { kind: "platform"; actor: string }
  /** A scoped API key: one tenant, maybe one agent, maybe read-only. */
  | { kind: "key"; actor: string; keyId: string; tenant: string; access: KeyAccess; agent: string | null };

/** `audited`: set by a route that wrote its own audit row. */
export type AccessEnv = { Bindings: Env; Variables: { caller?: Caller; audited?: true } };
