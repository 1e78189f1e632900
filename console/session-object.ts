// A console session as its own Durable Object, named by the stored key (the
// hash of the cookie's id): the session's id leads to it, so no object shared
// by everyone holds every session or is asked on each console request. It
// keeps its expiry and its person; signing out empties it, and past its expiry
// it empties itself (its alarm), so nothing of an ended session stays.
import { DurableObject } from "cloudflare:workers";
import * as z from "zod";
import { countedNamespace } from "../lib/object-calls.ts";

const KEY = "session";

export const storedSession = z.object({ expiresAt: z.number(), person: z.object({ identity: z.string(), name: z.string() }).optional() });
export type StoredSession = z.infer<typeof storedSession>;

export class ConsoleSession extends DurableObject<Env> {
  /** Opens the session; it ends itself at `expiresAt`. */
  async open(session: StoredSession): Promise<void> {
    await this.ctx.storage.put(KEY, storedSession.parse(session));
    await this.ctx.storage.setAlarm(session.expiresAt);
  }

  /** The live session, or null (none, or expired: then it is emptied at once). */
  async read(): Promise<StoredSession | null> {
    const stored = storedSession.safeParse(await this.ctx.storage.get(KEY));
    if (stored.success && stored.data.expiresAt > Date.now()) return stored.data;
    if (stored.success) await this.close();
    return null;
  }

  /** Signing out: nothing of it stays. */
  async close(): Promise<void> {
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
  }

  override async alarm(): Promise<void> {
    await this.close();
  }
}

export function sessionStub(env: Env, storedKey: string): DurableObjectStub<ConsoleSession> {
  const namespace = countedNamespace(env, "ConsoleSession", env.CONSOLE_SESSION as DurableObjectNamespace<ConsoleSession>);
  return namespace.get(namespace.idFromName(storedKey));
}
