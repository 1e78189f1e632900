// A platform is one folder and one line: a toy platform (test/fixtures/toy-bridge),
// registered beside the real bridges in test/worker-under-test.ts and named
// nowhere in runtime/, carries a message, its reply and an approval card whose
// button decides the held call once.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { TOY_TOKEN } from "../fixtures/toy-bridge/index.ts";
import { ledgerAppends, script, unique, waitFor, worker } from "../support.ts";

const E = env as unknown as Record<string, string>;

interface Shown {
  body: { kind: string; text?: string; state?: string; ref: string | null; card?: { state: string; decidedBy?: string; actions?: { approve: string; deny: string } } };
}

function toyEvent(body: Record<string, string>, token = TOY_TOKEN): Promise<Response> {
  return worker("/toy/events", { method: "POST", headers: { "content-type": "application/json", "x-toy-token": token }, body: JSON.stringify(body) });
}

/** What a person on the toy platform saw in the tenant, in order. */
async function seen(tenant: string): Promise<Shown[]> {
  return ((await (await fetch(`${E.FAKE_CALLBACK_URL}/_control/hooks/toy-${tenant}`)).json()) as { deliveries: Shown[] }).deliveries;
}

describe("a toy platform, one folder and one line", () => {
  it("refuses an event it cannot verify, and writes nothing", async () => {
    const tenant = unique("toy");
    expect((await toyEvent({ id: "x", tenant, conversation: "c", user: "u", text: "hi" }, "forged")).status).toBe(401);
    expect(await seen(tenant)).toEqual([]);
  });

  it("a message is answered in its conversation; a held call's card, clicked by the person who asked, performs the call once", async () => {
    const tenant = unique("toy");
    const s = unique("toy");
    await script(s, [{ text: "hello from the toy" }]);
    expect((await toyEvent({ id: `${s}-1`, tenant, conversation: s, user: "u1", text: `[s:${s}] hi` })).status).toBe(202);
    await waitFor("the reply", async () => (await seen(tenant)).some((d) => d.body.kind === "reply" && d.body.text === "hello from the toy"));

    const entry = unique("entry");
    const t = unique("toy");
    await script(t, [{ toolCalls: [{ name: "vault__append", arguments: { entry } }] }, { text: "asked for approval" }]);
    expect((await toyEvent({ id: `${t}-1`, tenant, conversation: t, user: "u1", text: `[s:${t}] append it` })).status).toBe(202);
    const card = await waitFor("the card", async () => (await seen(tenant)).find((d) => d.body.kind === "card" && d.body.card?.actions)?.body.card);
    expect(await ledgerAppends(entry)).toEqual([]);
    // A bystander's click is refused; the asker's decides, once however often it is sent.
    const bystander = await toyEvent({ id: `${t}-by`, tenant, conversation: t, user: "u2", click: card.actions!.approve });
    expect(((await bystander.json()) as { decided?: boolean }).decided).not.toBe(true);
    expect(await ledgerAppends(entry)).toEqual([]);
    const clicks = await Promise.all([1, 2, 3, 4, 5].map((n) => toyEvent({ id: `${t}-click-${n}`, tenant, conversation: t, user: "u1", click: card.actions!.approve })));
    expect(clicks.every((r) => r.status < 300)).toBe(true);
    await waitFor("the call, performed", async () => (await ledgerAppends(entry)).length > 0);
    const final = await waitFor("the card's last state", async () => (await seen(tenant)).filter((d) => d.body.kind === "card" && d.body.card?.state !== "pending" && d.body.card?.state !== "approved").at(-1)?.body.card);
    expect(final.decidedBy).toBe("u1");
    expect(await ledgerAppends(entry)).toHaveLength(1);
  });
});
