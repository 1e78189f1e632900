// The Cloudflare backend: each machine is a container (Cloudflare Containers,
// through @cloudflare/containers), one Durable Object of class `Machine` per
// machine id. The container runs the very machined the local host runs in
// bubblewrap, from a stock Node image: the Worker hands it machined's source
// as the entrypoint, so the image needs nothing of ours (and deploying needs
// no Docker). The object keeps the machine's spec and times, starts the
// container with no internet (only the mount's allowed hosts, through the
// Containers outbound interception) and forwards machined's requests to it.
import { Container } from "@cloudflare/containers";
import { MachineError, type MachineLabels, type MachineSpec, type MachineStatus } from "./backend.ts";
import { MachinedBackend, type MachinedFetch } from "./machined-client.ts";
// The file's text (a Text module rule in wrangler.jsonc), run by the container's node.
import machinedSource from "./machined.mjs";

const PORT = 8080;
const KEPT = "machine";
/** Cloudflare's CA for intercepted HTTPS, present in the container at run time; machined has commands trust it. */
const CLOUDFLARE_CA = "/etc/cloudflare/certs/cloudflare-containers-ca.crt";
/** How long a container may take to start and listen (a cold image pull included). */
const START_TIMEOUT_MS = 60_000;

interface Kept {
  spec: MachineSpec;
  labels: MachineLabels;
  createdAt: number;
  lastUsedAt: number;
}

function sameSpec(a: MachineSpec, b: MachineSpec): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

export class Machine extends Container<Env> {
  override defaultPort = PORT;
  // A backstop only: the lease destroys a machine long before this.
  override sleepAfter = "2h";
  override enableInternet = false;
  // So allowed https hosts are filtered by name too (machined has commands trust Cloudflare's CA).
  override interceptHttps = true;
  override entrypoint = ["node", "--input-type=module", "-e", machinedSource];

  private async kept(): Promise<Kept | undefined> {
    const kept = await this.ctx.storage.get<Kept>(KEPT);
    // A container that stopped by itself (it crashed, or slept) is no machine any more.
    return kept && this.ctx.container?.running ? kept : undefined;
  }

  private view(kept: Kept): MachineStatus {
    return { id: this.ctx.id.name ?? this.ctx.id.toString(), labels: kept.labels, spec: kept.spec, createdAt: new Date(kept.createdAt).toISOString(), lastUsedAt: new Date(kept.lastUsedAt).toISOString(), busy: false };
  }

  /** The ensure under way: a second one waits for it, so concurrent first calls start one machine. */
  private ensuring: Promise<unknown> = Promise.resolve();

  ensure(spec: MachineSpec, labels: MachineLabels): Promise<{ created: boolean; machine: MachineStatus }> {
    const next = this.ensuring.catch(() => undefined).then(() => this.ensureNow(spec, labels));
    this.ensuring = next;
    return next;
  }

  private async ensureNow(spec: MachineSpec, labels: MachineLabels): Promise<{ created: boolean; machine: MachineStatus }> {
    const kept = await this.kept();
    if (kept && sameSpec(kept.spec, spec)) {
      kept.lastUsedAt = Date.now();
      await this.ctx.storage.put(KEPT, kept);
      return { created: false, machine: this.view(kept) };
    }
    if (kept) await this.destroyMachine();
    // No internet; the allowed hosts only (an empty list denies every host).
    await this.setAllowedHosts(spec.allowedHosts);
    await this.startAndWaitForPorts({
      ports: PORT,
      startOptions: {
        entrypoint: this.entrypoint,
        enableInternet: false,
        envVars: { MACHINED_PORT: String(PORT), MACHINED_WORKSPACE: "/workspace", MACHINED_MEMORY_BYTES: String(spec.memoryMiB * 1024 * 1024), MACHINED_EXTRA_CA: CLOUDFLARE_CA },
        labels: { tenant: labels.tenant, agent: labels.agent },
      },
      cancellationOptions: { portReadyTimeoutMS: START_TIMEOUT_MS },
    });
    const fresh: Kept = { spec, labels, createdAt: Date.now(), lastUsedAt: Date.now() };
    await this.ctx.storage.put(KEPT, fresh);
    return { created: true, machine: this.view(fresh) };
  }

  async describe(): Promise<MachineStatus | undefined> {
    const kept = await this.kept();
    return kept && this.view(kept);
  }

  async destroyMachine(): Promise<{ destroyed: boolean }> {
    const running = this.ctx.container?.running === true;
    if (running) await this.destroy();
    await this.ctx.storage.delete(KEPT);
    return { destroyed: running };
  }

  /** machined's routes, for a machine that was ensured; a request never starts a container by itself. */
  override async fetch(request: Request): Promise<Response> {
    const kept = await this.kept();
    if (!kept) return Response.json({ error: `no machine ${this.ctx.id.name ?? this.ctx.id.toString()}` }, { status: 404 });
    kept.lastUsedAt = Date.now();
    await this.ctx.storage.put(KEPT, kept);
    return this.containerFetch(request, PORT);
  }

  override async onStop(): Promise<void> {
    await this.ctx.storage.delete(KEPT);
  }
}

/** The Machine objects' namespace, as the backend uses it (the seam the tests' fake container sits behind). */
export type MachineNamespace = DurableObjectNamespace<Machine>;

export class ContainerBackend extends MachinedBackend {
  readonly name = "Cloudflare Containers";

  constructor(private readonly machines: MachineNamespace) {
    super();
  }

  private stub(id: string) {
    return this.machines.get(this.machines.idFromName(id));
  }

  protected send(id: string): MachinedFetch {
    return (path, init) => this.stub(id).fetch(new Request(`http://machine${path}`, init));
  }

  async ensure(id: string, spec: MachineSpec, labels: MachineLabels): Promise<{ created: boolean; machine: MachineStatus }> {
    // The image is wrangler.jsonc's: one profile.
    if (spec.profile !== "default") throw new MachineError("refused", `profile "${spec.profile}" is not one this deployment has (default)`);
    try {
      return await this.stub(id).ensure(spec, labels);
    } catch (err) {
      throw new MachineError("failed", `starting the container failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  async status(id: string): Promise<MachineStatus | undefined> {
    return this.stub(id).describe();
  }

  async destroy(id: string): Promise<{ destroyed: boolean }> {
    return this.stub(id).destroyMachine();
  }
}
