// Calls into Durable Objects, counted by class and by object: the measure of
// docs/scale.md (`npm run bench`, section scale). Every namespace a stub is
// made from passes through countedNamespace; with COUNT_OBJECT_CALLS on, each
// call on a stub it made adds one to this isolate's tally, read at
// GET /v1/object-calls. Off (the default), it hands back the namespace itself.
// Why the caller counts, in one isolate's memory: docs/design.md, "Counting calls into objects".
import { countingObjectCalls } from "./config.ts";

/** Calls by object and method, `${class}\t${name}\t${method}`, since this isolate started. */
const tally = new Map<string, number>();

/** One object's calls of one method: its class (as wrangler.jsonc names it), its name, the method (an RPC method, or fetch). */
export interface ObjectCallCount {
  objectClass: string;
  object: string;
  method: string;
  calls: number;
}

/** Every object and method called since this isolate started, most called first. */
export function objectCallCounts(): ObjectCallCount[] {
  return [...tally]
    .map(([key, calls]) => {
      const [objectClass = "", object = "", method = ""] = key.split("\t");
      return { objectClass, object, method, calls };
    })
    .sort((a, b) => b.calls - a.calls);
}

/** What stubs are made from: a Durable Object namespace (DurableObjectNamespace<T> for any class T). */
type StubMaker = { get(id: DurableObjectId, options?: DurableObjectNamespaceGetDurableObjectOptions): object };

/**
 * The namespace of `objectClass` as given, or with counting on one whose stubs
 * count each call (an RPC method or fetch) against the object's name and the method.
 */
export function countedNamespace<N extends StubMaker>(env: Pick<Env, "COUNT_OBJECT_CALLS">, objectClass: string, namespace: N): N {
  if (!countingObjectCalls(env)) return namespace;
  return new Proxy(namespace, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (prop !== "get" || typeof value !== "function") return typeof value === "function" ? value.bind(target) : value;
      return (id: DurableObjectId, options?: DurableObjectNamespaceGetDurableObjectOptions) => countedStub(value.call(target, id, options) as object, `${objectClass}\t${id.name ?? id.toString()}`);
    },
  });
}

function countedStub<S extends object>(stub: S, object: string): S {
  return new Proxy(stub, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop);
      if (typeof prop === "symbol" || typeof value !== "function") return value;
      const key = `${object}\t${prop}`;
      return (...args: unknown[]) => {
        tally.set(key, (tally.get(key) ?? 0) + 1);
        return Reflect.apply(value, target, args);
      };
    },
  });
}
