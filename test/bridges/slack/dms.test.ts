// DMs as people use them: a DM's top-level messages are one running
// conversation answered in the DM itself; a thread in the DM is its own
// conversation, answered in that thread. Replays the recorded DM pair.
import { describe, expect, it } from "vitest";
import { settled, waitFor } from "../../support.ts";
import direct from "../../fixtures/slack/dm-direct-slack.json";
import { AGENT, conversationOf, newTs, postEvent, replay, slackId, threadMessages } from "./helpers.ts";

/** The replies (postMessage without blocks) in a channel once there are `n` of them. */
const replies = (channel: string, n: number) =>
  waitFor(`${n} replies in ${channel}`, async () => {
    const found = await threadMessages(channel);
    return found.length >= n ? found : undefined;
  });

describe("Slack DMs", () => {
  it("the recorded DM pair is one conversation, answered twice in the main DM view", async () => {
    const team = slackId("T");
    const dm = slackId("D");
    await postEvent(replay(direct.directDM, { team, channel: dm }));
    await replies(dm, 1);
    await postEvent(replay(direct.followUp, { team, channel: dm }));
    const answers = await replies(dm, 2);
    // Both answers are in the DM itself, not threaded under the person's messages.
    expect(answers.map((a) => [a.body.markdown_text, a.body.thread_ts])).toEqual([
      ["ok: hello hello", undefined],
      ["ok: cool!!", undefined],
    ]);
    const view = await settled(team, AGENT, `${team}:${dm}:dm`);
    expect(view.transcript.map((e) => [e.role, e.text])).toEqual([
      ["user", "hello hello"],
      ["assistant", "ok: hello hello"],
      ["user", "cool!!"],
      ["assistant", "ok: cool!!"],
    ]);
  });

  it("a reply inside a thread of the DM is that thread's conversation, answered in the thread", async () => {
    const team = slackId("T");
    const dm = slackId("D");
    await postEvent(replay(direct.directDM, { team, channel: dm }));
    const [answer] = await replies(dm, 1);
    const threadTs = newTs();
    await postEvent(replay(direct.followUp, { team, channel: dm, event: { ts: threadTs, thread_ts: answer!.ts, text: "about that" } }));
    const [, inThread] = await replies(dm, 2);
    expect([inThread!.body.markdown_text, inThread!.body.thread_ts]).toEqual(["ok: about that", answer!.ts]);
    const thread = await settled(team, AGENT, conversationOf(team, dm, answer!.ts!));
    expect(thread.transcript.map((e) => e.text)).toEqual(["about that", "ok: about that"]);
    const main = await settled(team, AGENT, `${team}:${dm}:dm`);
    expect(main.transcript.map((e) => e.text)).toEqual(["hello hello", "ok: hello hello"]);
  });
});
