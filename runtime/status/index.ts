// The status room: what the `status` command answers in chat, composed from
// facts the agent's object hands it.
export { type StatusFacts, statusText } from "./status.ts";
