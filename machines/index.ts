// The machines folder's public interface: the backend interface, the backend
// this deployment is configured with, and the Cloudflare backend's Durable
// Object class (exported by the Worker entry). The machine host itself is a
// Node program (machines/host/host.mjs), not imported here.
import { ConfigError } from "../lib/config.ts";
import { MachineError, type MachineBackend } from "./backend.ts";
import { ContainerBackend } from "./cloudflare.ts";
import { machineBackendKind, machineHost } from "./config.ts";
import { HostBackend } from "./host-backend.ts";
import { countedNamespace } from "../lib/object-calls.ts";

export { MachineError, type MachineBackend, type MachineSpec, type MachineLabels, type MachineStatus, type ExecRequest, type ExecResult, type CapturedOutput, type FileEntry, type Listing } from "./backend.ts";
export { Machine, ContainerBackend } from "./cloudflare.ts";
/** The Worker must export it: a container's allowed hosts are enforced through it. */
export { ContainerProxy } from "@cloudflare/containers";
export { HostBackend } from "./host-backend.ts";

/** The backend MACHINE_BACKEND names; throws a MachineError ("unavailable") saying why there is none. */
export function machineBackend(env: Env): MachineBackend {
  try {
    const kind = machineBackendKind(env);
    if (kind === "local") {
      const { url, token } = machineHost(env);
      return new HostBackend(url, token);
    }
    if (kind === "cloudflare") return new ContainerBackend(countedNamespace(env, "Machine", env.MACHINE));
  } catch (err) {
    if (err instanceof ConfigError) throw new MachineError("unavailable", `no machine backend is available: ${err.message}`);
    throw err;
  }
  throw new MachineError("unavailable", "no machine backend is available: MACHINE_BACKEND is none (locally, npm start runs the machine host when bubblewrap is installed; see docs/machines.md)");
}
