// Names for the channel links and mentions people write. Slack sends them as
// bare ids (`<#C123>`, `<@U456>`); the model should read who and where, so the
// ingress gives each its name in Slack's own labelled form (`<#C123|general>`,
// `<@U456|Ana>`), which the model can also write back as a link. Names are
// looked up with conversations.info and users.info before the event is
// accepted, within a small time budget, and kept per workspace in this
// isolate for an hour; a name that cannot be had in time leaves the id as it was.
import { botTokenFor } from "./installations.ts";
import { callSlack } from "./web-api.ts";

/** A channel link or a user mention without a label (Slack's ids: C/G/D for conversations, U/W for users). */
const BARE_REFERENCE = /<([#@])([CGDUW][A-Z0-9]{2,30})>/g;
/** The whole lookup's budget: Slack wants its answer within 3 s, and the event is accepted after this. */
const LOOKUP_BUDGET_MS = 1_500;
const KEPT_MS = 3_600_000;
/** Entries kept across all workspaces; the oldest goes first. */
const MAX_ENTRIES = 5_000;

const cache = new Map<string, { name: string; until: number }>();

function cached(key: string): string | undefined {
  const entry = cache.get(key);
  if (entry && entry.until > Date.now()) return entry.name;
  if (entry) cache.delete(key);
  return undefined;
}

function keep(key: string, name: string): void {
  cache.delete(key);
  cache.set(key, { name, until: Date.now() + KEPT_MS });
  if (cache.size > MAX_ENTRIES) cache.delete(cache.keys().next().value!);
}

/** A label Slack accepts inside `<…|label>`: no angle brackets, pipes or line breaks. */
const label = (name: string) => name.replace(/[<>|\n\r]/g, " ").trim().slice(0, 80);

async function lookUp(env: Env, token: string, sigil: string, id: string): Promise<string | null> {
  // These read methods take form arguments, not JSON.
  if (sigil === "#") {
    const found = await callSlack(env, "conversations.info", token, new URLSearchParams({ channel: id }));
    const channel = found.ok ? (found.data.channel as { name?: unknown } | undefined) : undefined;
    return typeof channel?.name === "string" ? channel.name : null;
  }
  const found = await callSlack(env, "users.info", token, new URLSearchParams({ user: id }));
  const user = found.ok ? (found.data.user as { name?: unknown; real_name?: unknown; profile?: { display_name?: unknown; real_name?: unknown } } | undefined) : undefined;
  const names = [user?.profile?.display_name, user?.profile?.real_name, user?.real_name, user?.name];
  return (names.find((n) => typeof n === "string" && n.trim() !== "") as string | undefined) ?? null;
}

/** `text` with each bare channel link and mention labelled with its name, where it can be had in time. */
export async function withNames(env: Env, tenant: string, text: string): Promise<string> {
  const ids = [...new Set([...text.matchAll(BARE_REFERENCE)].map((m) => `${m[1]}${m[2]}`))];
  if (ids.length === 0) return text;
  const names = new Map<string, string>();
  const missing = ids.filter((ref) => {
    const name = cached(`${tenant}:${ref}`);
    if (name !== undefined) names.set(ref, name);
    return name === undefined;
  });
  if (missing.length > 0) {
    const token = await botTokenFor(env, tenant);
    if (token) {
      const lookups = Promise.all(
        missing.map(async (ref) => {
          const name = await lookUp(env, token, ref[0]!, ref.slice(1)).catch(() => null);
          if (name === null || label(name) === "") return;
          keep(`${tenant}:${ref}`, label(name));
          names.set(ref, label(name));
        }),
      );
      await Promise.race([lookups, new Promise((resolve) => setTimeout(resolve, LOOKUP_BUDGET_MS))]);
    }
  }
  return text.replace(BARE_REFERENCE, (whole, sigil: string, id: string) => {
    const name = names.get(`${sigil}${id}`);
    return name === undefined ? whole : `<${sigil}${id}|${name}>`;
  });
}
