// The platform's `ctx.container` (workerd's Container interface) for a
// Machine object in the tests, where no container runtime exists: each call
// goes to the loopback fake runtime (test/fakes/containers.mjs), which runs
// the container's entrypoint as a process. Everything above it, the Machine
// object and @cloudflare/containers, runs as deployed.

/** What the fake answers a port fetch with while nothing listens (the text @cloudflare/containers looks for). */
const NOT_LISTENING_STATUS = 599;

export function fakeContainer(runtimeUrl: string, id: string): Container {
  const base = `${runtimeUrl}/containers/${id}`;
  let running = false;
  /** The last start's request: what follows it (a wait, a port fetch) goes after it. */
  let started: Promise<unknown> = Promise.resolve();
  const post = (op: string, body: unknown = {}) => fetch(`${base}/${op}`, { method: "POST", body: JSON.stringify(body) });
  const port = (number: number): Fetcher =>
    ({
      async fetch(input: RequestInfo | URL, init?: RequestInit) {
        const request = new Request(input, init);
        const url = new URL(request.url);
        await started;
        const res = await fetch(new Request(`${base}/port/${number}${url.pathname}${url.search}`, request));
        if (res.status === NOT_LISTENING_STATUS) throw new Error(((await res.json()) as { error: string }).error);
        return res;
      },
      connect() {
        throw new Error("the fake container runtime has no TCP sockets");
      },
    }) as unknown as Fetcher;
  const intercept = async (kind: string, host: string) => void (await post("intercept", { kind, host }));
  return {
    get running() {
      return running;
    },
    start(options?: ContainerStartupOptions) {
      running = true;
      // The platform starts it asynchronously too: a port answers once the process listens.
      started = post("start", options);
    },
    async monitor() {
      await started;
      const { exitCode } = (await (await post("wait")).json()) as { exitCode: number | null };
      running = false;
      if (exitCode) throw new Error(`Container exited with unexpected exit code: ${exitCode}`);
    },
    async destroy() {
      await post("destroy");
      running = false;
    },
    signal(signo: number) {
      void post("signal", { signo });
    },
    getTcpPort: port,
    async setInactivityTimeout() {},
    interceptOutboundHttp: (addr: string) => intercept("http", addr),
    interceptOutboundHttps: (addr: string) => intercept("https", addr),
    interceptAllOutboundHttp: () => intercept("http", "*"),
    async snapshotDirectory() {
      throw new Error("the fake container runtime takes no snapshots");
    },
    async snapshotContainer() {
      throw new Error("the fake container runtime takes no snapshots");
    },
  };
}
