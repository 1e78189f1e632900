// How a turn's status reads in text on every platform that shows it as a
// message: its state's icon, then what the runtime says.
import type { OutboundMessage } from "../../runtime/index.ts";

const STATUS_ICONS = { working: "⏳", done: "✅", stopped: "⏹️", failed: "⚠️" } as const;

export const statusText = (message: Extract<OutboundMessage, { kind: "status" }>) => `${STATUS_ICONS[message.state]} ${message.text}`;
