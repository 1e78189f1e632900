// What the runtime is given by the Worker entry rather than importing: each
// bridge's outbound (the runtime imports no bridge) and the plugins a mount may name.
import type { Plugin } from "../plugins/index.ts";
import type { ChatOutbound, Platform } from "./chat.ts";

export interface RuntimeDeps {
  outbounds: readonly ChatOutbound[];
  plugins: readonly Plugin[];
}

export function outboundFor(deps: RuntimeDeps, platform: Platform): ChatOutbound | undefined {
  return deps.outbounds.find((o) => o.platform === platform);
}
