// A tenant's people, API keys and secrets in the console, for a tenant admin
// or the platform: roles granted and taken away, keys made (the key shown
// once, on the page that answers the form) and revoked, secrets set by value
// (never shown again) and deleted. The same calls as /v1 (runtime/access),
// each change in the audit trail under the person's name.
import type { KeyRow, RoleRow, SecretListing } from "../runtime/index.ts";
import { PostForm, Time } from "./layout.tsx";
import { keyRevokePath, keysPath, roleRemovePath, rolesPath, secretDeletePath, secretsPath, tenantPath } from "./paths.ts";
import type { Tokens } from "./pages.tsx";
import { Person } from "./names.tsx";

export function PeopleSection(props: { tenant: string; roles: RoleRow[]; tokens: Tokens }) {
  const grant = rolesPath(props.tenant);
  return (
    <section id="people">
      <h3>People</h3>
      {props.roles.length === 0 ? (
        <p class="muted">No one has a role here yet.</p>
      ) : (
        <table class="roles">
          <thead><tr><th>Person</th><th>Role</th><th>Granted</th><th>By</th><th /></tr></thead>
          <tbody>
            {props.roles.map((r) => (
              <tr>
                <td><Person who={r.identity} /></td>
                <td>{r.role}</td>
                <td><Time at={r.grantedAt} /></td>
                <td>{r.grantedBy}</td>
                <td>
                  <PostForm action={roleRemovePath(props.tenant, r.identity)} token={props.tokens.get(roleRemovePath(props.tenant, r.identity)) ?? ""}>
                    <button>Take the role away</button>
                  </PostForm>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <PostForm action={grant} token={props.tokens.get(grant) ?? ""}>
        <label>Person <input type="text" name="identity" placeholder="slack:T123:U456" required /></label>
        <label>
          Role{" "}
          <select name="role">
            <option value="member">member: their own conversations and approvals</option>
            <option value="admin">admin: the tenant's agents, usage, limits, people and keys</option>
          </select>
        </label>
        <button>Give the role</button>
      </PostForm>
    </section>
  );
}

export function KeysSection(props: { tenant: string; keys: KeyRow[]; tokens: Tokens }) {
  const create = keysPath(props.tenant);
  return (
    <section id="keys">
      <h3>API keys</h3>
      {props.keys.length === 0 ? (
        <p class="muted">This tenant has no API key.</p>
      ) : (
        <table class="keys">
          <thead><tr><th>Name</th><th>Id</th><th>Access</th><th>Agent</th><th>Created</th><th>Last used</th><th>Revoked</th><th /></tr></thead>
          <tbody>
            {props.keys.map((k) => (
              <tr>
                <td>{k.name}</td>
                <td><code>{k.id}</code></td>
                <td>{k.access}</td>
                <td>{k.agent ?? "all"}</td>
                <td><Time at={k.createdAt} /></td>
                <td>{k.lastUsedAt === null ? "never" : <Time at={k.lastUsedAt} />}</td>
                <td>{k.revokedAt === null ? "—" : <Time at={k.revokedAt} />}</td>
                <td>
                  {k.revokedAt === null ? (
                    <PostForm action={keyRevokePath(props.tenant, k.id)} token={props.tokens.get(keyRevokePath(props.tenant, k.id)) ?? ""}>
                      <button>Revoke</button>
                    </PostForm>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <PostForm action={create} token={props.tokens.get(create) ?? ""} event>
        <label>Name <input type="text" name="name" required maxlength={100} /></label>
        <label>
          Access{" "}
          <select name="access">
            <option value="write">write: the tenant's routes</option>
            <option value="read">read: reads only</option>
            <option value="admin">admin: also its keys, roles and webhook secret</option>
          </select>
        </label>
        <label>Agent (empty: every agent) <input type="text" name="agent" /></label>
        <button>Create the key</button>
      </PostForm>
    </section>
  );
}

/** The answer to "Create the key": the only time the key is shown; only its hash is kept. */
export function NewKeyBody(props: { tenant: string; made: KeyRow & { key: string } }) {
  return (
    <>
      <p>
        {`Key "${props.made.name}" (${props.made.id}, ${props.made.access}${props.made.agent ? `, agent ${props.made.agent}` : ""}) is made. Copy it now: it is shown this once, and only its hash is kept.`}
      </p>
      <pre class="new-key">{props.made.key}</pre>
      <p>
        <a href={`${tenantPath(props.tenant)}#keys`}>Back to the tenant</a>
      </p>
    </>
  );
}

export function SecretsSection(props: { tenant: string; secrets: SecretListing[]; tokens: Tokens }) {
  const set = secretsPath(props.tenant);
  return (
    <section id="secrets">
      <h3>Secrets</h3>
      <p class="muted">API tokens and keys for this tenant's mounts (<code>secret_ref</code>) and model choices (<code>secret</code>). A value is sealed and never shown again.</p>
      {props.secrets.length === 0 ? (
        <p class="muted">This tenant has no secret.</p>
      ) : (
        <table class="secrets">
          <thead><tr><th>Name</th><th>Set</th><th>Changed</th><th>By</th><th /></tr></thead>
          <tbody>
            {props.secrets.map((s) => (
              <tr>
                <td><code>{s.name}</code></td>
                <td><Time at={s.createdAt} /></td>
                <td><Time at={s.updatedAt} /></td>
                <td>{s.updatedBy}</td>
                <td>
                  <PostForm action={secretDeletePath(props.tenant, s.name)} token={props.tokens.get(secretDeletePath(props.tenant, s.name)) ?? ""}>
                    <button>Delete</button>
                  </PostForm>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <PostForm action={set} token={props.tokens.get(set) ?? ""}>
        <label>Name <input type="text" name="name" placeholder="GITHUB_TOKEN" pattern="[A-Z][A-Z0-9_]{0,63}" required /></label>
        <label>Value <input type="password" name="value" autocomplete="off" required /></label>
        <button>Set the secret</button>
      </PostForm>
    </section>
  );
}

/** The form actions of the sections, for their tokens. */
export function accessActions(tenant: string, roles: RoleRow[], keys: KeyRow[], secrets: SecretListing[]): string[] {
  return [
    rolesPath(tenant),
    keysPath(tenant),
    secretsPath(tenant),
    ...roles.map((r) => roleRemovePath(tenant, r.identity)),
    ...keys.filter((k) => k.revokedAt === null).map((k) => keyRevokePath(tenant, k.id)),
    ...secrets.map((s) => secretDeletePath(tenant, s.name)),
  ];
}
