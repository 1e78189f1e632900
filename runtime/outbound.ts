// Which bridge delivers to which platform. The Worker entry registers each
// bridge's outbound at start-up, so the runtime never imports a bridge.
import type { ChatOutbound, Platform } from "./chat.ts";

const outbounds = new Map<Platform, ChatOutbound>();

export function registerOutbound(outbound: ChatOutbound): void {
  outbounds.set(outbound.platform, outbound);
}

export function outboundFor(platform: Platform): ChatOutbound | undefined {
  return outbounds.get(platform);
}
