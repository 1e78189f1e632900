// Upgrades (docs/design.md, "Migrations"): an agent object written by the
// previous release (test/fixtures/upgrade/object.sql, dumped from its real
// SQLite mid-work) is booted by this code, which migrates it and finishes what
// was under way: a turn whose model call was in flight, a call held for
// approval, and chat sends queued while the chat was down.
import { runInDurableObject } from "cloudflare:test";
import { expect, it } from "vitest";
import fixture from "../../fixtures/upgrade/object.sql?raw";
import { migrate } from "../../../runtime/object/index.ts";
import { agent, evict, fireAlarm, rows, schemaOf } from "../../agents.ts";
import { answered, ledgerAppends, providerRequests, script, waitFor } from "../../support.ts";
import { hook, registerCallback, send } from "../../bridges/webhook/helpers.ts";

// The fixture's object: a webhook tenant, so its sends go to the fake callback receiver.
const TENANT = "upgrade";
const AGENT = "assistant";
/**
 * The deploy comes this long after the dump: the leases the previous
 * release's couriers held have run out (they are not in the fixture), and no
 * deadline or hold has.
 */
const DEPLOY_AFTER_MS = 5 * 60_000;

/** Writes the fixture into the object's storage as the previous release left it, its clock moved to the deploy, then restarts the object on this code. */
async function loadFixture(): Promise<void> {
  const dumpedAt = Number(/^-- dumped_at: (\d+)$/m.exec(fixture)![1]);
  const alarm = /^-- alarm: (\d+)$/m.exec(fixture)?.[1];
  const shift = Date.now() - DEPLOY_AFTER_MS - dumpedAt;
  await runInDurableObject(agent(TENANT, AGENT), async (_instance, state) => {
    const sql = state.storage.sql;
    expect(schemaOf(state.storage)).toEqual([]);
    sql.exec(fixture);
    // Times are ms since the epoch in columns named at, *_at and *_since.
    for (const { name: table } of sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").toArray()) {
      for (const { name: column } of sql.exec<{ name: string }>(`PRAGMA table_info("${table}")`).toArray()) {
        if (/^(at|.*_at|.*_since)$/.test(column)) sql.exec(`UPDATE "${table}" SET "${column}" = "${column}" + ? WHERE "${column}" IS NOT NULL`, shift);
      }
    }
    // Not before the restart: due now, it would run on this instance, made before the fixture and so not migrated
    // (its alarm would find none of this code's tables). The test runs it on the new one (fireAlarm).
    if (alarm) await state.storage.setAlarm(Math.max(Number(alarm) + shift, Date.now() + 60_000));
  });
  await evict(TENANT, AGENT);
}

it("an object the previous release left mid-work is migrated and finishes its turn in flight, its held call and its queued send, each once", async () => {
  // The chat is back: the tenant's callback answers.
  await registerCallback(TENANT);
  // The model's next answers (the fake provider forgot the scenarios with its last process).
  await script("upgrade-inflight", [{ text: "The turn in flight finished after the upgrade." }]);
  await script("upgrade-held", [{ text: "Recorded after the upgrade." }]);

  await loadFixture();
  await fireAlarm(TENANT, AGENT);

  // The schema is this code's, as an object created now has it.
  const upgraded = await runInDurableObject(agent(TENANT, AGENT), (_instance, state) => schemaOf(state.storage));
  const fresh = await runInDurableObject(agent("upgrade-fresh", crypto.randomUUID()), (_instance, state) => {
    migrate(state.storage);
    return schemaOf(state.storage);
  });
  expect(upgraded).toEqual(fresh);

  // The turn in flight: its model job is dispatched again (its courier is gone) and the turn finishes.
  await answered(TENANT, AGENT, "inflight", "The turn in flight finished after the upgrade.");
  expect(await providerRequests("upgrade-inflight")).toHaveLength(1);

  // The queued sends reach the chat, the reply once.
  const replied = await waitFor("the queued reply at the callback", async () => {
    const { deliveries } = await hook(TENANT);
    return deliveries.some((d) => d.body.type === "status" && d.body.conversation === "queued" && d.body.state === "done") && deliveries;
  });
  expect(replied.filter((d) => d.body.type === "reply" && d.body.text === "The reply queued across the upgrade.")).toHaveLength(1);

  // The held call: approved now by the person who asked, performed once, and the agent answers.
  const [hold] = await rows<{ id: string; status: string }>(TENANT, AGENT, "SELECT id, status FROM holds");
  expect(hold!.status).toBe("pending");
  const decided = await send(TENANT, {
    type: "decision",
    value: `hold:approve:${TENANT}:${AGENT}:${hold!.id}`,
    idempotency_key: `upgrade-approve-${hold!.id}`,
    conversation: "held",
    user: { id: "u1", name: "Ada" },
  });
  expect(await decided.json()).toMatchObject({ notice: "Approved. Performing it now." });
  await answered(TENANT, AGENT, "held", "Recorded after the upgrade.");
  expect(await ledgerAppends("upgrade-entry")).toHaveLength(1);

  // Nothing reached the chat twice.
  const deliveries = await waitFor("the held turn's reply at the callback", async () => {
    const { deliveries } = await hook(TENANT);
    return deliveries.some((d) => d.body.type === "reply" && d.body.text === "Recorded after the upgrade.") && deliveries;
  });
  expect(new Set(deliveries.map((d) => d.idempotencyKey)).size).toBe(deliveries.length);
  expect(deliveries.filter((d) => d.body.type === "reply").map((d) => d.body.text).sort()).toEqual(
    ["Recorded after the upgrade.", "The reply queued across the upgrade.", "The turn in flight finished after the upgrade.", "Waiting for approval."].sort(),
  );
});
