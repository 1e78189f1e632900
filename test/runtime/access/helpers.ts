// What the access tests share: a /v1 call with a bearer credential, and a key made through the API.
import { expect } from "vitest";
import { worker } from "../../support.ts";

export const ADMIN = "Bearer test-admin-token";

export const bearer = (key: string) => `Bearer ${key}`;

export function call(auth: string, method: string, path: string, body?: unknown): Promise<Response> {
  return worker(`/v1${path}`, {
    method,
    headers: { authorization: auth, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

/** A key of `tenant`, made by `auth` (201 expected): its id and the key, shown once. */
export async function newKey(auth: string, tenant: string, spec: { name: string; access?: string; agent?: string }): Promise<{ id: string; key: string }> {
  const res = await call(auth, "POST", `/tenants/${tenant}/keys`, spec);
  expect(res.status, await res.clone().text()).toBe(201);
  return res.json();
}
