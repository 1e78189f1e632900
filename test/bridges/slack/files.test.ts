// Files shared in a thread: fetched from url_private with the bot token, size-capped,
// and given to the model as text, as image input (for a model that takes images),
// or named. The message shape is the recorded `aiMentionWithFile` (test/fixtures/slack/streaming-slack.json).
import { env } from "cloudflare:workers";
import { beforeAll, describe, expect, it } from "vitest";
import { chooseModels, providerRequests, script, settled, worker, type ProviderRequest } from "../../support.ts";
import streaming from "../../fixtures/slack/streaming-slack.json";
import { AGENT, conversationOf, fakeSlackEnv, messageEnvelope, newTs, postEvent, replay, slackId, statusFinal } from "./helpers.ts";

const E = env as unknown as { LARGE_VALUES: R2Bucket };

/** A 1×1 PNG. */
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

type FileFetch = { path: string; token: string | null; status: number; bytes: number };

/** Puts a file on the fake Slack; returns its file object as a message event carries it. */
async function shareFile(name: string, mimetype: string, bytes: Uint8Array, declaredSize = bytes.length) {
  const path = `${slackId("T")}-${slackId("F")}/${name}`;
  await fetch(`${fakeSlackEnv.FAKE_SLACK_URL}/_control/files/${path}`, { method: "PUT", body: JSON.stringify({ base64: Buffer.from(bytes).toString("base64"), mimetype }) });
  const recordedFile = streaming.aiMentionWithFile.event.files[0]!;
  return { ...recordedFile, name, title: name, mimetype, size: declaredSize, url_private: `${fakeSlackEnv.FAKE_SLACK_URL}/files-pri/${path}` };
}

async function fileFetches(): Promise<FileFetch[]> {
  return (await fetch(`${fakeSlackEnv.FAKE_SLACK_URL}/_control/file-fetches`)).json();
}

/** Starts a thread with the agent, then shares `files` in it (the recorded file_share shape). */
async function shareInThread(team: string, scenario: string, files: unknown[]): Promise<string> {
  const channel = slackId("C");
  const thread = newTs();
  await postEvent(messageEnvelope({ team, channel, ts: thread, text: "hello" }));
  await statusFinal(channel, "Done.");
  const ts = newTs();
  const envelope = replay(streaming.aiMentionWithFile, { team, channel, event: { type: "message", subtype: "file_share", ts, event_ts: ts, thread_ts: thread, user: "UPERSON1", text: `have a look [s:${scenario}]`, files } });
  envelope.authorizations = [{ enterprise_id: null, team_id: team, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: false }];
  expect((await postEvent(envelope)).status).toBe(200);
  await settled(team, AGENT, conversationOf(team, channel, thread));
  return channel;
}

/** The last user message of the one request the scenario made. */
async function lastUserContent(scenario: string): Promise<unknown> {
  const requests: ProviderRequest[] = await providerRequests(scenario);
  expect(requests).toHaveLength(1);
  return requests[0]!.body.messages.filter((m) => m.role === "user").at(-1)!.content;
}

const texts = (content: unknown) => (typeof content === "string" ? content : (content as { type: string; text?: string }[]).map((c) => c.text ?? "").join(""));

describe("Slack: files shared in a thread", () => {
  // This file imports no runtime module: the Worker's (pi-ai among them) load on its first request, not inside the first test.
  beforeAll(() => worker("/"), 90_000);

  it("a text file is fetched with the bot token and reaches the model as text (the fake refuses it without the token)", async () => {
    const team = slackId("T");
    const scenario = slackId("file-text");
    await script(scenario, [{ text: "read it" }]);
    const file = await shareFile("notes.txt", "text/plain", new TextEncoder().encode("the answer is 42"));
    expect((await fetch(file.url_private)).status).toBe(403);
    await shareInThread(team, scenario, [file]);

    expect(texts(await lastUserContent(scenario))).toBe(`have a look [s:${scenario}]\n\n<file name="notes.txt" type="text/plain">\nthe answer is 42\n</file>`);
    const path = new URL(file.url_private).pathname;
    expect((await fileFetches()).filter((f) => f.path === path)).toEqual([
      { path, token: null, status: 403, bytes: 0 },
      { path, token: fakeSlackEnv.SLACK_BOT_TOKEN, status: 200, bytes: 16 },
    ]);
  });

  it("an image is stored in R2 by reference and reaches a model that takes images as image input; a text-only model is told it cannot see it", async () => {
    const [vision, textOnly] = [slackId("T"), slackId("T")];
    await chooseModels({ [vision]: "fake-anthropic/claude-sonnet-4-5" });
    const image = () => shareFile("image.png", "image/png", Buffer.from(PNG, "base64"));

    const seen = slackId("file-image");
    await script(seen, [{ text: "a dot" }]);
    await shareInThread(vision, seen, [await image()]);
    expect(await lastUserContent(seen)).toContainEqual(expect.objectContaining({ type: "image", source: { type: "base64", media_type: "image/png", data: PNG } }));
    // Its bytes are in R2 once, under the agent and their sha256; the agent's rows keep only that reference.
    const sha = [...new Uint8Array(await crypto.subtle.digest("SHA-256", Buffer.from(PNG, "base64")))].map((b) => b.toString(16).padStart(2, "0")).join("");
    expect((await E.LARGE_VALUES.list({ prefix: `images/${vision}/${AGENT}/` })).objects.map((o) => o.key)).toEqual([`images/${vision}/${AGENT}/${sha}`]);
    const { storedText } = await import("../../agents.ts"); // loaded once the Worker is (see beforeAll)
    expect(await storedText(vision, AGENT)).not.toContain(PNG.slice(0, 40));

    const named = slackId("file-image-text");
    await script(named, [{ text: "cannot see it" }]);
    await shareInThread(textOnly, named, [await image()]);
    const content = await lastUserContent(named);
    expect(JSON.stringify(content)).not.toContain(PNG);
    expect(texts(content)).toContain("[image image.png (image/png, 70 bytes)](image not shown: this model cannot see images)");
  });

  it("an oversized file is named with a note and never fetched; one larger than Slack said is not read whole", async () => {
    const team = slackId("T");
    const scenario = slackId("file-big");
    await script(scenario, [{ text: "too big" }]);
    const big = await shareFile("big.log", "text/plain", new Uint8Array(300 * 1024).fill(97));
    const lying = await shareFile("small.log", "text/plain", new Uint8Array(300 * 1024).fill(98), 1000);
    const zip = await shareFile("archive.zip", "application/zip", new Uint8Array(10));
    await shareInThread(team, scenario, [big, lying, zip]);

    expect(texts(await lastUserContent(scenario))).toBe(
      [
        `have a look [s:${scenario}]`,
        "[file big.log (text/plain, 307200 bytes), not shown: larger than the 256 KiB the agent reads of a text file]",
        "[file small.log (text/plain, 1000 bytes), not shown: it could not be fetched (larger than 256 KiB)]",
        "[file archive.zip (application/zip, 10 bytes), not shown: a kind of file the agent cannot read]",
      ].join("\n\n"),
    );
    const fetched = (await fileFetches()).map((f) => f.path);
    expect(fetched).not.toContain(new URL(big.url_private).pathname);
    expect(fetched).not.toContain(new URL(zip.url_private).pathname);
  });
});
