// API keys live in each tenant's own object (issue 39): a key names its
// tenant, so a request made with it is checked there and asks no
// deployment-wide object; a revoked key is refused at the next request; a
// key changed to name another tenant is unknown there. A key made by the
// release before (`apk_<id>_<secret>`, a row of the control plane's) still
// works: the first touch of the tenant's keys moves its rows into the
// tenant's object, once, and only the old key's hash and tenant stay in the
// control plane to send it there.
import { env } from "cloudflare:workers";
import { runInDurableObject } from "cloudflare:test";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ControlPlane, controlPlane } from "../../../runtime/index.ts";
import { tenantStub } from "../../../runtime/control/index.ts";
import { hashKey, keyTenant } from "../../../runtime/access/index.ts";
import { toBase64Url } from "../../../lib/base64.ts";
import { unique } from "../../support.ts";
import { ADMIN, bearer, call, newKey } from "./helpers.ts";

const usage = (key: string, tenant: string) => call(bearer(key), "GET", `/tenants/${tenant}/usage`);

/** Counts every call made to any control plane method from now on. */
function watchControlPlane(): () => string[] {
  const calls: string[] = [];
  for (const name of Object.getOwnPropertyNames(ControlPlane.prototype)) {
    if (name === "constructor") continue;
    const method = (ControlPlane.prototype as unknown as Record<string, unknown>)[name];
    if (typeof method !== "function") continue;
    vi.spyOn(ControlPlane.prototype as unknown as Record<string, (...args: unknown[]) => unknown>, name).mockImplementation(function (this: unknown, ...args: unknown[]) {
      calls.push(name);
      return (method as (...args: unknown[]) => unknown).apply(this, args);
    });
  }
  return () => calls;
}

afterEach(() => {
  vi.restoreAllMocks();
});

/** A key made the way the release before made it, and its row written where it kept it. */
async function oldKey(tenant: string, spec: { revoked?: boolean } = {}): Promise<{ id: string; key: string; hash: string }> {
  const id = `k${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const key = `apk_${id}_${toBase64Url(crypto.getRandomValues(new Uint8Array(32)))}`;
  const hash = await hashKey(key);
  await runInDurableObject(controlPlane(env), (_instance, state) => {
    state.storage.sql.exec(
      "INSERT INTO api_keys (id, tenant, hash, name, access, agent, created_at, created_by, revoked_at) VALUES (?, ?, ?, ?, 'write', NULL, ?, 'platform:admin-token', ?)",
      id,
      tenant,
      hash,
      `old ${id}`,
      Date.now() - 86_400_000,
      spec.revoked ? Date.now() - 3_600_000 : null,
    );
  });
  return { id, key, hash };
}

/** What the control plane keeps of a tenant's keys: its rows (the release before), and its index of old keys. */
function controlKeys(tenant: string): Promise<{ rows: string[]; index: string[] }> {
  return runInDurableObject(controlPlane(env), (_instance, state) => ({
    rows: state.storage.sql.exec<{ id: string }>("SELECT id FROM api_keys WHERE tenant = ? ORDER BY id", tenant).toArray().map((r) => r.id),
    index: state.storage.sql.exec<{ hash: string }>("SELECT hash FROM old_keys WHERE tenant = ? ORDER BY hash", tenant).toArray().map((r) => r.hash),
  }));
}

function tenantKeyRows(tenant: string): Promise<{ id: string; revoked_at: number | null; handed_over: number }[]> {
  return runInDurableObject(tenantStub(env, tenant), (_instance, state) =>
    state.storage.sql.exec<{ id: string; revoked_at: number | null; handed_over: number }>("SELECT id, revoked_at, handed_over FROM api_keys ORDER BY id").toArray(),
  );
}

describe("keys that name their tenant", () => {
  it("a new key names its tenant, is kept in the tenant's object only, and is checked there without the control plane", async () => {
    const T = unique("kt.a-b_c");
    const { id, key } = await newKey(ADMIN, T, { name: "ci" });
    expect(key).toMatch(/^apk_k[0-9a-f]{12}_[A-Za-z0-9_-]+_[A-Za-z0-9_-]{43}$/);
    expect(keyTenant(key)).toBe(T);
    expect((await tenantKeyRows(T)).map((r) => r.id)).toEqual([id]);
    expect(await controlKeys(T)).toEqual({ rows: [], index: [] });

    const asked = watchControlPlane();
    const res = await usage(key, T);
    expect(res.status, await res.clone().text()).toBe(200);
    expect(asked()).toEqual([]);
  });

  it("a revoked key is refused at the very next request", async () => {
    const T = unique("ktrev");
    const { id, key } = await newKey(ADMIN, T, { name: "ci" });
    expect((await usage(key, T)).status).toBe(200);
    expect((await call(ADMIN, "DELETE", `/tenants/${T}/keys/${id}`)).status).toBe(200);
    const after = await usage(key, T);
    expect(after.status).toBe(401);
    expect(await after.json()).toEqual({ error: "unknown or revoked API key" });
  });

  it("a key changed to name another tenant is no key of that tenant's (401), and one naming a tenant with no object writes none", async () => {
    const [A, B] = [unique("ktfa"), unique("ktfb")];
    const { key } = await newKey(ADMIN, A, { name: "a" });
    await newKey(ADMIN, B, { name: "b" });
    const secret = key.slice(-43);
    const id = key.slice(4, 17);
    const forged = `apk_${id}_${toBase64Url(new TextEncoder().encode(B))}_${secret}`;
    expect(keyTenant(forged)).toBe(B);
    expect((await usage(forged, B)).status).toBe(401);
    expect((await usage(key, B)).status).toBe(404);
    // Text that is no key of either shape is refused before any object is asked.
    const asked = watchControlPlane();
    for (const bad of [`${key}x`, key.slice(0, -1), `apk_${id}_%%_${secret}`]) expect((await usage(bad, A)).status).toBe(401);
    expect(asked()).toEqual([]);
    const nobody = unique("ktnobody");
    expect((await usage(`apk_${id}_${toBase64Url(new TextEncoder().encode(nobody))}_${secret}`, nobody)).status).toBe(401);
    const claimed = await runInDurableObject(tenantStub(env, nobody), (_instance, state) => state.storage.sql.exec("SELECT tenant FROM identity").toArray());
    expect(claimed).toEqual([]);
  });
});

describe("keys the release before made", () => {
  it("still work: the tenant's rows move into its object at the first touch, once, and only the live keys' hashes stay in the control plane", async () => {
    const T = unique("ktold");
    const live = await oldKey(T);
    const other = await oldKey(T);
    const revoked = await oldKey(T, { revoked: true });
    expect((await controlKeys(T)).rows).toHaveLength(3);

    // Two first requests at once: one handover, each row copied once.
    const asked = watchControlPlane();
    const [first, second] = await Promise.all([usage(live.key, T), usage(other.key, T)]);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(asked().filter((name) => name === "oldKeyTenant")).toHaveLength(2);
    expect(asked().filter((name) => name === "oldKeys")).toHaveLength(1);
    // An old key's tenant never changes: this isolate asks the control plane once.
    expect((await usage(live.key, T)).status).toBe(200);
    expect(asked().filter((name) => name === "oldKeyTenant")).toHaveLength(2);
    expect(await tenantKeyRows(T)).toEqual(
      [live, other, revoked].map((k) => ({ id: k.id, revoked_at: k === revoked ? expect.any(Number) : null, handed_over: 1 })).sort((a, b) => a.id.localeCompare(b.id)),
    );
    expect(await controlKeys(T)).toEqual({ rows: [], index: [live.hash, other.hash].sort() });
    expect((await usage(revoked.key, T)).status).toBe(401);

    // Listed with the tenant's own keys; revoked in its object, at once, and forgotten by the index.
    const made = await newKey(ADMIN, T, { name: "new" });
    const listed = ((await (await call(ADMIN, "GET", `/tenants/${T}/keys`)).json()) as { keys: { id: string; lastUsedAt: number | null }[] }).keys;
    expect(listed.map((k) => k.id).sort()).toEqual([live.id, other.id, revoked.id, made.id].sort());
    expect(listed.find((k) => k.id === live.id)!.lastUsedAt).toEqual(expect.any(Number));
    expect((await call(ADMIN, "DELETE", `/tenants/${T}/keys/${live.id}`)).status).toBe(200);
    expect((await usage(live.key, T)).status).toBe(401);
    expect((await usage(other.key, T)).status).toBe(200);
    expect(await controlKeys(T)).toEqual({ rows: [], index: [other.hash] });
  });

  it("a tenant's keys listed before any old key is used are moved too, and the old key works after", async () => {
    const T = unique("ktlist");
    const old = await oldKey(T);
    const listed = ((await (await call(ADMIN, "GET", `/tenants/${T}/keys`)).json()) as { keys: { id: string }[] }).keys;
    expect(listed.map((k) => k.id)).toEqual([old.id]);
    expect(await controlKeys(T)).toEqual({ rows: [], index: [old.hash] });
    expect((await usage(old.key, T)).status).toBe(200);
    // Its tenant is the key's, whatever the path names.
    expect((await usage(old.key, unique("ktelse"))).status).toBe(404);
  });
});
