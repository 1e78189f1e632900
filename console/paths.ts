// Where each console page and form lives. Names and ids are restricted by
// parseRoute and CONVERSATION_ID; each segment is encoded all the same.
import type { Route } from "../runtime/index.ts";
import { BASE } from "./session.ts";

const seg = encodeURIComponent;

export function tenantPath(tenant: string): string {
  return `${BASE}/tenants/${seg(tenant)}`;
}

export function agentPath(route: Route): string {
  return `${tenantPath(route.tenant)}/agents/${seg(route.agent)}`;
}

export function conversationPath(route: Route, id: string): string {
  return `${agentPath(route)}/conversations/${seg(id)}`;
}

export function holdPath(route: Route, holdId: string): string {
  return `${agentPath(route)}/holds/${seg(holdId)}`;
}

/** The form that sets the agent's second-message strategy. */
export function secondMessagePath(route: Route): string {
  return `${agentPath(route)}/second-message`;
}

export type ConversationAction = "messages" | "stop" | "compact";

export function actionPath(route: Route, id: string, action: ConversationAction): string {
  return `${conversationPath(route, id)}/${action}`;
}

/** The form that sets the tenant's own daily spend limit. */
export function limitPath(tenant: string): string {
  return `${tenantPath(tenant)}/limits`;
}

/** The form that gives a person a role in the tenant. */
export function rolesPath(tenant: string): string {
  return `${tenantPath(tenant)}/roles`;
}

export function roleRemovePath(tenant: string, identity: string): string {
  return `${rolesPath(tenant)}/${seg(identity)}/remove`;
}

/** The form that makes an API key of the tenant. */
export function keysPath(tenant: string): string {
  return `${tenantPath(tenant)}/keys`;
}

export function keyRevokePath(tenant: string, keyId: string): string {
  return `${keysPath(tenant)}/${seg(keyId)}/revoke`;
}

/** The form that sets one of the tenant's secrets by value. */
export function secretsPath(tenant: string): string {
  return `${tenantPath(tenant)}/secrets`;
}

export function secretDeletePath(tenant: string, name: string): string {
  return `${secretsPath(tenant)}/${seg(name)}/delete`;
}

/** The form that sets the platform's bounds for the tenant's admins. */
export function boundsPath(tenant: string): string {
  return `${tenantPath(tenant)}/bounds`;
}
