// Slack's assistant surface without streaming: a started thread gets the
// agent's suggested prompts; the channel the person looks at reaches the model
// as a note; the working state shows with assistant.threads.setStatus instead
// of a status message, set again before Slack lets it fade while a long turn
// works; the thread is titled after its first message.
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { providerRequests, releaseProvider, script, settled, unique, waitFor, withVars } from "../../support.ts";
import { AGENT, messageEnvelope, newTs, postEvent, slackCalls, slackId, threadMessages } from "./helpers.ts";

const FAKE_SLACK_URL = (env as unknown as Record<string, string>).FAKE_SLACK_URL!;

interface Call {
  method: string;
  body: { channel_id?: string; thread_ts?: string; status?: string; title?: string; prompts?: { title: string; message: string }[] };
}

async function assistantCalls(dm: string, method: string): Promise<Call[]> {
  const calls: Call[] = await (await fetch(`${FAKE_SLACK_URL}/_control/calls?method=${method}`)).json();
  return calls.filter((c) => c.body.channel_id === dm);
}

/** An assistant thread event as Slack sends it (Events API, event_callback). */
function threadEvent(type: "assistant_thread_started" | "assistant_thread_context_changed", o: { team: string; user: string; dm: string; threadTs: string; looking?: string }) {
  return {
    token: "verification-token",
    team_id: o.team,
    api_app_id: "AFAKEAPP",
    type: "event_callback",
    event_id: slackId("Ev"),
    event_time: Math.floor(Date.now() / 1000),
    authorizations: [{ enterprise_id: null, team_id: o.team, user_id: "UFAKEBOT", is_bot: true, is_enterprise_install: false }],
    event: {
      type,
      assistant_thread: { user_id: o.user, context: o.looking ? { channel_id: o.looking, team_id: o.team, enterprise_id: null } : {}, channel_id: o.dm, thread_ts: o.threadTs },
      event_ts: newTs(),
    },
  };
}

const directory = (channels: Record<string, string>) => fetch(`${FAKE_SLACK_URL}/_control/directory`, { method: "PUT", body: JSON.stringify({ channels }) });

describe("Slack assistant threads", () => {
  it("started: suggested prompts; a message: the channel looked at as a note, status under the input, a title, the reply in the thread", async () => {
    const prompts = [{ title: "Plan my day", message: "Plan my day from my calendar." }];
    await withVars({ SLACK_ASSISTANT: "true", SLACK_SUGGESTED_PROMPTS: JSON.stringify(prompts) }, async () => {
      const team = slackId("T");
      const user = slackId("U");
      const dm = slackId("D");
      const threadTs = newTs();
      const looking = slackId("C");
      await directory({ [looking]: "launch-plan" });
      expect((await postEvent(threadEvent("assistant_thread_started", { team, user, dm, threadTs, looking }))).status).toBe(200);
      const [set] = await waitFor("suggested prompts", async () => {
        const calls = await assistantCalls(dm, "assistant.threads.setSuggestedPrompts");
        return calls.length > 0 && calls;
      });
      expect(set!.body).toMatchObject({ thread_ts: threadTs, prompts });

      const s = unique("assist");
      await script(s, [{ text: "Here is the plan." }]);
      const text = `[s:${s}] what is happening in the launch?`;
      await postEvent(messageEnvelope({ team, channel: dm, ts: newTs(), thread_ts: threadTs, text, user, mention: false, event: { channel_type: "im" } }));
      const view = await settled(team, AGENT, `${team}:${dm}:${threadTs}`);
      expect(view.transcript.at(-1)!.text).toBe("Here is the plan.");
      // The model read where the person is looking, with the channel's name.
      const asked = JSON.stringify((await providerRequests(s))[0]!.body.messages);
      expect(asked).toContain(`The person is looking at the channel <#${looking}|launch-plan> in Slack.`);
      expect(asked.indexOf(`<#${looking}|launch-plan>`)).toBeLessThan(asked.indexOf("what is happening in the launch?"));

      const replies = await waitFor("the reply", async () => {
        const found = await threadMessages(dm);
        return found.length > 0 && found;
      });
      expect(replies.map((r) => [r.body.markdown_text, r.body.thread_ts])).toEqual([["Here is the plan.", threadTs]]);
      const statuses = await waitFor("the status cleared", async () => {
        const calls = await assistantCalls(dm, "assistant.threads.setStatus");
        return calls.at(-1)?.body.status === "" && calls;
      });
      expect(statuses.map((c) => [c.body.thread_ts, c.body.status])).toEqual([
        [threadTs, "is thinking…"],
        [threadTs, ""],
      ]);
      // No status message with a Stop button in an assistant thread.
      expect((await slackCalls(dm)).filter((c) => c.body.blocks)).toEqual([]);
      const titles = await waitFor("the title", async () => {
        const calls = await assistantCalls(dm, "assistant.threads.setTitle");
        return calls.length > 0 && calls;
      });
      expect(titles.map((c) => c.body.title)).toEqual([text]);

      // A second message: no new title; the channel changed: the model reads it next.
      const other = slackId("C");
      await directory({ [other]: "design" });
      await postEvent(threadEvent("assistant_thread_context_changed", { team, user, dm, threadTs, looking: other }));
      await postEvent(messageEnvelope({ team, channel: dm, ts: newTs(), thread_ts: threadTs, text: `[s:${s}] and now?`, user, mention: false, event: { channel_type: "im" } }));
      await waitFor("the second answer", async () => (await providerRequests(s)).length === 2);
      // The note of where the person looks comes before their question, as it came before it in Slack.
      const second = JSON.stringify((await providerRequests(s))[1]!.body.messages);
      expect(second).toContain(`The person is looking at the channel <#${other}|design> in Slack.`);
      expect(second.indexOf(`<#${other}|design>`)).toBeLessThan(second.indexOf("and now?"));
      await settled(team, AGENT, `${team}:${dm}:${threadTs}`);
      expect(await assistantCalls(dm, "assistant.threads.setTitle")).toHaveLength(1);
    });
  });
});

describe("Slack assistant threads, streamed", () => {
  // Issue 17, acceptance 1: the whole path in one thread.
  it("a replayed assistant_thread_started sets prompts; a message sets status and title and its answer is streamed: one reply message", async () => {
    const prompts = [{ title: "Summarise", message: "Summarise this channel." }];
    await withVars({ SLACK_ASSISTANT: "true", SLACK_SUGGESTED_PROMPTS: JSON.stringify(prompts) }, async () => {
      const [team, user, dm, threadTs] = [slackId("T"), slackId("U"), slackId("D"), newTs()];
      await postEvent(threadEvent("assistant_thread_started", { team, user, dm, threadTs }));
      await waitFor("suggested prompts", async () => (await assistantCalls(dm, "assistant.threads.setSuggestedPrompts")).length > 0);

      const s = unique("assist-stream");
      const reply = "Streamed into the assistant thread, a few words at a time, to the end.";
      await script(s, [{ text: reply, argumentChunk: 6, chunkDelayMs: 150 }]);
      await postEvent(messageEnvelope({ team, channel: dm, ts: newTs(), thread_ts: threadTs, text: `[s:${s}] stream it`, user, mention: false, event: { channel_type: "im" } }));
      await settled(team, AGENT, `${team}:${dm}:${threadTs}`);

      await waitFor("the status cleared", async () => (await assistantCalls(dm, "assistant.threads.setStatus")).at(-1)?.body.status === "");
      expect((await assistantCalls(dm, "assistant.threads.setStatus"))[0]!.body).toMatchObject({ thread_ts: threadTs, status: "is thinking…" });
      await waitFor("the title", async () => (await assistantCalls(dm, "assistant.threads.setTitle")).length === 1);
      const streamed = await waitFor("the stream stopped", async () => {
        const calls = (await slackCalls(dm)).filter((c) => c.method.endsWith("Stream"));
        return calls.at(-1)?.method === "chat.stopStream" && calls;
      });
      expect(streamed[0]!.method).toBe("chat.startStream");
      expect(streamed[0]!.body).toMatchObject({ channel: dm, thread_ts: threadTs });
      expect(streamed.slice(1, -1).every((c) => c.method === "chat.appendStream")).toBe(true);
      expect(streamed.map((c) => (c.body as { markdown_text?: string }).markdown_text ?? "").join("")).toBe(reply);
      // Exactly one reply message: no post besides the stream's own.
      expect((await slackCalls(dm, "chat.postMessage")).filter((c) => c.body.thread_ts === threadTs)).toEqual([]);
    });
  });
});

describe("Slack assistant threads, a held call", () => {
  it("a turn that ends with a call held for approval leaves 'is waiting for approval of …' under the input", async () => {
    await withVars({ SLACK_ASSISTANT: "true" }, async () => {
      const [team, user, dm, threadTs] = [slackId("T"), slackId("U"), slackId("D"), newTs()];
      const s = unique("assist-held");
      await script(s, [{ toolCalls: [{ name: "vault__append", arguments: { entry: unique("entry") } }] }, { text: "I asked for approval." }]);
      await postEvent(messageEnvelope({ team, channel: dm, ts: newTs(), thread_ts: threadTs, text: `[s:${s}] record it`, user, mention: false, event: { channel_type: "im" } }));
      await settled(team, AGENT, `${team}:${dm}:${threadTs}`);
      const statuses = await waitFor("the waiting status", async () => {
        const calls = await assistantCalls(dm, "assistant.threads.setStatus");
        return calls.at(-1)?.body.status?.startsWith("is waiting") && calls;
      });
      expect(statuses.at(-1)!.body).toMatchObject({ thread_ts: threadTs, status: "is waiting for approval of vault__append…" });
      expect(new Set(statuses.slice(0, -1).map((c) => c.body.status))).toEqual(new Set(["is thinking…"]));
    });
  });
});

describe("Slack assistant threads, a long turn", () => {
  it("sets 'is thinking…' again before Slack's expiry while the model works, and never after the turn ends", { timeout: 90_000 }, async () => {
    // Slack's two minutes, shortened: the runtime renews every 3 s (¾ of the 4 s it is told); the fake lets a
    // status go after 8 s, so one renewal late on a loaded machine is not a fade, and none at all is.
    await withVars({ SLACK_ASSISTANT: "true", SLACK_STATUS_EXPIRY_SECONDS: "4" }, async () => {
      const [team, user, dm, threadTs] = [slackId("T"), slackId("U"), slackId("D"), newTs()];
      await fetch(`${FAKE_SLACK_URL}/_control/limits`, { method: "POST", body: JSON.stringify({ channel: dm, statusExpiryMs: 8_000 }) });
      const shown = async () => (await (await fetch(`${FAKE_SLACK_URL}/_control/status?${new URLSearchParams({ channel: dm, thread_ts: threadTs })}`)).json()) as { status: string; at: number | null };
      const s = unique("assist-long");
      await script(s, [{ hold: true, text: "Thought it through." }]);
      await postEvent(messageEnvelope({ team, channel: dm, ts: newTs(), thread_ts: threadTs, text: `[s:${s}] think hard`, user, mention: false, event: { channel_type: "im" } }));
      await waitFor("the status set", async () => (await shown()).status === "is thinking…");
      // The model is held until the status was set four times (past twice its life at the fake): the person sees it thinking all along.
      let during = await assistantCalls(dm, "assistant.threads.setStatus");
      for (const deadline = Date.now() + 60_000; during.length < 4; during = await assistantCalls(dm, "assistant.threads.setStatus")) {
        expect((await shown()).status).toBe("is thinking…");
        if (Date.now() > deadline) throw new Error(`the status was set ${during.length} times in 60 s, where every 3 s was asked for`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(new Set(during.map((c) => c.body.status))).toEqual(new Set(["is thinking…"]));
      await releaseProvider(s);
      await settled(team, AGENT, `${team}:${dm}:${threadTs}`);
      await waitFor("the status cleared", async () => (await assistantCalls(dm, "assistant.threads.setStatus")).at(-1)?.body.status === "");
      const ended = (await assistantCalls(dm, "assistant.threads.setStatus")).length;
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      expect(await assistantCalls(dm, "assistant.threads.setStatus")).toHaveLength(ended);
      expect((await shown()).status).toBe("");
    });
  });
});
