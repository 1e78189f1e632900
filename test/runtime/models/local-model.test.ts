// The offline local model: which tool it calls for which request, and how it
// reads a held call and a runtime note (as a real model would, from their text).
import type { Message } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import { localModel } from "../../../runtime/models/index.ts";

const tools = ["clock__now", "inbox__post"].map((name) => ({ name, description: name, parameters: {} }));
const user = (content: string): Message => ({ role: "user", content, timestamp: 0 });
const toolResult = (toolName: string, text: string): Message => ({
  role: "toolResult",
  toolCallId: "local_0",
  toolName,
  content: [{ type: "text", text }],
  isError: false,
  timestamp: 0,
});
const answer = (...messages: Message[]) => localModel({ model: { model: "local" }, systemPrompt: "", messages, tools });
const textOf = (m: ReturnType<typeof localModel>) => m.content.map((c) => (c.type === "text" ? c.text : "")).join("");

describe("local model", () => {
  it("calls the clock for the time, and the post tool for a post to a URL", () => {
    expect(answer(user("What time is it?")).content.find((c) => c.type === "toolCall")).toMatchObject({ name: "clock__now" });
    const post = answer(user('Please post "hello" to http://127.0.0.1:8788/inbox.'));
    expect(post.stopReason).toBe("toolUse");
    expect(post.content.find((c) => c.type === "toolCall")).toMatchObject({
      name: "inbox__post",
      arguments: { url: "http://127.0.0.1:8788/inbox", body: "hello" },
    });
  });

  it("without a post tool, a post request is echoed with what it can do", () => {
    const reply = localModel({ model: { model: "local" }, systemPrompt: "", messages: [user("please post hello to http://x.test/")], tools: tools.slice(0, 1) });
    expect(reply.stopReason).toBe("stop");
    expect(textOf(reply)).toMatch(/^You said: "please post hello to http:\/\/x.test\/"/);
    expect(textOf(reply)).not.toMatch(/post text to a URL/);
  });

  it("says it asked for approval when its call is held, instead of quoting the runtime", () => {
    const text = textOf(answer(user("post hi to https://x.test/"), toolResult("inbox__post", "Held for approval (hold h1): a person has been asked …")));
    expect(text).toBe("I have asked for approval to run inbox__post; it has not run yet. I will tell you what happened once someone decides.");
  });

  it("reports a runtime note (a held call's outcome) rather than echoing it", () => {
    const note = user("[runtime note] The held call inbox__post (hold h1) was approved by console:admin. Performed: HTTP 200");
    expect(textOf(answer(note))).toBe("Update: the held call inbox__post (hold h1) was approved by console:admin. Performed: HTTP 200");
  });
});
