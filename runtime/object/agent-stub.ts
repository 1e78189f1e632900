// How anything outside an agent's object reaches it: the one object per
// (tenant, agent), by name.
import type { AgentObject } from "./agent-object.ts";
import type { Route } from "../chat.ts";
import { countedNamespace } from "../../lib/object-calls.ts";

export function agentStub(env: Env, route: Route): DurableObjectStub<AgentObject> {
  const namespace = countedNamespace(env, "AgentObject", env.AGENT as DurableObjectNamespace<AgentObject>);
  return namespace.get(namespace.idFromName(`${route.tenant}:${route.agent}`));
}
