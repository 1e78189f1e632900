// The bodies of the access routes, as zod schemas (also for the OpenAPI document).
import * as z from "zod";
import { SECRET_NAME } from "../../plugins/index.ts";

const NAME = /^[A-Za-z0-9._-]{1,128}$/;

export const keyAccessSchema = z.enum(["admin", "write", "read"]);

/** POST /v1/tenants/{t}/keys */
export const newKeyBody = z
  .object({
    name: z.string().trim().min(1, "name the key").max(100),
    /** admin: also manages the tenant's keys, roles and webhook secret; write (default): the tenant's routes; read: reads only. */
    access: keyAccessSchema.default("write"),
    /** Scope the key to one agent of the tenant. */
    agent: z.string().regex(NAME, "agent: letters, digits, . _ - (max 128)").optional(),
  })
  .strict()
  .refine((k) => !(k.access === "admin" && k.agent !== undefined), "an admin key has no agent");

/** A person, as the approval cards and sign-in name them: `slack:<team>:<user>` or `discord:<guild>:<user>`. */
export const IDENTITY = /^(slack|discord):[A-Za-z0-9_-]{1,64}:[A-Za-z0-9_-]{1,64}$/;
export const identitySchema = z.string().regex(IDENTITY, "identity: slack:<team>:<user> or discord:<guild>:<user>");

export const tenantRoleSchema = z.enum(["admin", "member"]);
export type TenantRole = z.infer<typeof tenantRoleSchema>;

/** PUT /v1/tenants/{t}/roles/{identity} */
export const roleBody = z.object({ role: tenantRoleSchema }).strict();

/** A secret's name, as mounts (`secret_ref`) and model choices (`secret`) name it. */
export const secretNameSchema = z.string().regex(SECRET_NAME, "a secret's name: UPPER_SNAKE_CASE, at most 64 characters");

/** PUT /v1/tenants/{t}/secrets/{name}: the value, never shown again. */
export const secretBody = z.object({ value: z.string().min(1, "the secret's value is empty").max(16_384, "a secret is at most 16,384 characters") }).strict();
