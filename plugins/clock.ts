// The built-in read-only plugin: tells the time, so a tool turn works with no setup.
import * as z from "zod";
import type { Plugin } from "./contract.ts";

export const clockPlugin: Plugin = {
  name: "clock",
  description: "Tells the current date and time.",
  runsIn: "object",
  tools: [
    {
      name: "now",
      description: "The current date and time, in UTC or in a given IANA time zone.",
      parameters: z.object({ timeZone: z.string().optional().describe("IANA time zone, e.g. Europe/Paris") }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ timeZone }) {
        const now = new Date();
        if (!timeZone) return { text: now.toISOString() };
        try {
          const local = now.toLocaleString("en-GB", { timeZone, dateStyle: "full", timeStyle: "long" });
          return { text: `${local} (${now.toISOString()})` };
        } catch {
          return { text: `Unknown time zone "${timeZone}"`, isError: true };
        }
      },
    },
  ],
};
