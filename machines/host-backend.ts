// The local backend: the machine host (machines/host/host.mjs) on loopback,
// which runs each machine in bubblewrap. workerd cannot start processes, so
// the Worker asks the host over HTTP, as it would ask a container's port.
import { MachineError, type MachineLabels, type MachineSpec, type MachineStatus } from "./backend.ts";
import { answerError, MachinedBackend, type MachinedFetch } from "./machined-client.ts";

export class HostBackend extends MachinedBackend {
  readonly name = "bubblewrap on the local machine host";

  constructor(
    private readonly url: string,
    private readonly token: string,
  ) {
    super();
  }

  private async request(path: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set("authorization", `Bearer ${this.token}`);
    try {
      return await fetch(`${this.url}${path}`, { ...init, headers });
    } catch (err) {
      throw new MachineError("unavailable", `the machine host at ${this.url} cannot be reached (${err instanceof Error ? err.message : String(err)}); is it running? (npm start starts it)`);
    }
  }

  protected send(id: string): MachinedFetch {
    return (path, init) => this.request(`/machines/${id}${path}`, init);
  }

  async ensure(id: string, spec: MachineSpec, labels: MachineLabels): Promise<{ created: boolean; machine: MachineStatus }> {
    const put = () => this.request(`/machines/${id}`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ spec, labels }) });
    let res = await put();
    if (res.status === 409) {
      // It runs with an older spec (the mount was changed): a new machine replaces it.
      await res.body?.cancel();
      await this.destroy(id);
      res = await put();
    }
    if (res.status === 401) throw new MachineError("unavailable", "the machine host refused MACHINE_HOST_TOKEN (the Worker and the host must share it)");
    if (!res.ok) throw await answerError(res, "starting the machine");
    return { created: res.status === 201, machine: (await res.json()) as MachineStatus };
  }

  async status(id: string): Promise<MachineStatus | undefined> {
    const res = await this.request(`/machines/${id}`);
    if (res.status === 404) {
      await res.body?.cancel();
      return undefined;
    }
    if (!res.ok) throw await answerError(res, "reading the machine's status");
    return (await res.json()) as MachineStatus;
  }

  async destroy(id: string): Promise<{ destroyed: boolean }> {
    const res = await this.request(`/machines/${id}`, { method: "DELETE" });
    if (!res.ok) throw await answerError(res, "destroying the machine");
    return (await res.json()) as { destroyed: boolean };
  }
}
