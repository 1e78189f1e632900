// The Worker as deployed, plus one test-only plugin standing in for an outside
// system with a non-idempotent write (it talks to the loopback ledger fake),
// a toy chat platform registered in one line (test/fixtures/toy-bridge), and
// the Machine object on a fake container runtime (the tests have no
// containers: test/fakes/container.ts plays the platform's ctx.container).
import * as z from "zod";
import { builtinPlugins, type Plugin } from "../plugins/index.ts";
import { AgentObject as AgentCore, Courier as CourierCore } from "../runtime/index.ts";
import { Machine as MachineCore } from "../machines/index.ts";
import { createWorker, deployed, runtimeDeps, type Composition } from "../worker.ts";
import { toy } from "./fixtures/toy-bridge/index.ts";
import { fakeContainer } from "./fakes/container.ts";

const ledgerPlugin: Plugin = {
  name: "ledger",
  description: "Test ledger on loopback.",
  tools: [
    {
      name: "append",
      description: "Append an entry to the ledger (not idempotent).",
      parameters: z.object({ entry: z.string() }),
      sideEffects: "write",
      idempotency: "never",
      async call({ entry }, ctx) {
        const url = (ctx.config.url as string | undefined) ?? "";
        const res = await fetch(`${url}/append`, { method: "POST", body: JSON.stringify({ entry, key: ctx.callKey }) });
        const body = (await res.json()) as { count: number };
        return { text: `appended "${entry}" (${body.count})` };
      },
    },
    {
      name: "read",
      description: "Read the ledger's entries.",
      parameters: z.object({ entry: z.string() }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ entry }, ctx) {
        const url = (ctx.config.url as string | undefined) ?? "";
        const res = await fetch(`${url}/appends?entry=${encodeURIComponent(entry)}`, { headers: { "x-ledger-reader": "tool" } });
        return { text: `${((await res.json()) as unknown[]).length} entries for "${entry}"` };
      },
    },
  ],
};

const composition: Composition = {
  bridges: [...deployed.bridges, toy],
  plugins: [...builtinPlugins, ledgerPlugin],
};
const deps = runtimeDeps(composition);

export { ConsoleSession, ControlPlane, Ledger, PersonRoles, ProviderGate, SendPace, Tenant, ContainerProxy } from "../worker.ts";

export class Machine extends MachineCore {
  constructor(ctx: DurableObjectState<{}>, env: Env) {
    const url = (env as unknown as Record<string, string>).FAKE_CONTAINERS_URL!;
    Object.defineProperty(ctx, "container", { value: fakeContainer(url, ctx.id.toString()), configurable: true });
    super(ctx, env);
  }
}

export class AgentObject extends AgentCore {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, deps);
  }
}

export class Courier extends CourierCore {
  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env, deps);
  }
}

export default createWorker(composition);
