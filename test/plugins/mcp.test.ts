// MCP servers as mounts: a real server built with the official SDK
// (test/fakes/mcp.mjs) on loopback, mounted per agent, and the reference
// server itself (@modelcontextprotocol/server-everything, test/fakes/everything.mjs).
// Its tool list is fetched off the object and kept with the mount; its tools
// are offered as `<alias>__<tool>` (but those that cannot or may not be
// called), gated by their annotations, called through couriers; a session the
// server lost is renewed; failures reach the model as tool errors it can read.
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { nameTools } from "../../plugins/tool-names.ts";
import { agent, rows, storedText } from "../agents.ts";
import { captureConsole, NO_LEAKS, secretLeaks } from "../leaks.ts";
import { AGENT, buttons, conversationOf, isCard, messageEnvelope, newTs, postEvent, slackCalls, slackClick, slackId, threadMessages } from "../bridges/slack/helpers.ts";
import { getConversation, postMessage, providerRequests, script, settled, unique, waitFor, worker, type ScriptStep, type View } from "../support.ts";

const E = env as unknown as Record<string, string>;
const MCP_URL = E.FAKE_MCP_URL!;
const TOKEN = E.MCP_API_TOKEN!;
const HOST = new URL(MCP_URL).host;
const ADMIN = { authorization: "Bearer test-admin-token", "content-type": "application/json" };
const T = "mcp";
/** The fake's tool with a name too long for any provider once the alias is put before it. */
const LONG_TOOL_NAME = "summarize_section_section_section_section_section_section_section_end";

interface McpCall {
  tool: string;
  args: Record<string, unknown>;
  session: string;
  authorization?: string;
  apiKey?: string;
}

async function serverCalls(tool: string, marker = ""): Promise<McpCall[]> {
  return (await fetch(`${MCP_URL}/_control/calls?${new URLSearchParams({ tool, marker })}`)).json();
}

async function sessionsStarted(): Promise<{ session: string; authorization: string }[]> {
  return (await fetch(`${MCP_URL}/_control/initializations`)).json();
}

/** The fake forgets every session, as a restarted server does, answering them as `answer` says (test/fakes/mcp.mjs); `tool` is one it comes back with. */
async function forget(answer: "400" | "404" | "401-session" | "401-token", tool?: string): Promise<void> {
  const res = await fetch(`${MCP_URL}/_control/forget?${new URLSearchParams({ answer, ...(tool ? { tool } : {}) })}`, { method: "POST" });
  expect(res.status).toBe(200);
}

async function serverDown(on: boolean): Promise<void> {
  await fetch(`${MCP_URL}/_control/down?on=${on}`, { method: "POST" });
}

function docsMount(config: Record<string, unknown> = {}, policy?: Record<string, unknown>) {
  return { alias: "docs", plugin: "mcp", config: { url: `${MCP_URL}/mcp`, ...config }, secret_ref: "MCP_API_TOKEN", ...(policy ? { policy } : {}) };
}

async function mount(tenant: string, name: string, mounts: unknown[]): Promise<void> {
  const res = await worker(`/v1/tenants/${tenant}/agents/${name}/mounts`, { method: "PUT", headers: ADMIN, body: JSON.stringify(mounts) });
  expect(res.status, await res.clone().text()).toBe(200);
}

/** A conversation of one turn over the Agents API (the fake model follows the first script a conversation names): its steps, then the settled view. */
async function turn(name: string, steps: ScriptStep[]): Promise<{ view: View; s: string; conversation: string }> {
  const s = unique("mcp");
  const conversation = unique("c");
  await script(s, steps);
  await postMessage(T, name, { text: `[s:${s}] go`, conversation });
  return { view: await settled(T, name, conversation), s, conversation };
}

async function status(tenant: string, name: string, conversation: string): Promise<string> {
  const result = await agent(tenant, name).submit(
    { tenant, agent: name },
    { id: unique("status"), kind: "command", command: "status", conversation, user: { platform: "api", id: "admin" } },
  );
  return result.notice ?? "";
}

/** The tools a model request offered, by name. */
async function offered(s: string, request = 0): Promise<Map<string, { description: string; parameters: Record<string, unknown> }>> {
  const body = (await providerRequests(s))[request]!.body as { tools?: { function: { name: string; description: string; parameters: Record<string, unknown> } }[] };
  return new Map((body.tools ?? []).map((t) => [t.function.name, t.function]));
}

const toolResults = (view: View) => view.transcript.filter((e) => e.role === "tool");

/** The renaming rule as docs/plugins.md states it, computed here on its own: FNV-1a of the UTF-8 name, 8 hex digits. */
function hashed(name: string): string {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(name)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, "0");
}

afterEach(async () => {
  vi.restoreAllMocks();
  await serverDown(false);
});

describe("an MCP server as a mount", () => {
  it("offers the server's tools as <alias>__<tool> with its JSON Schema from the first model call, and status lists what was renamed", async () => {
    const A = "lister";
    await mount(T, A, [docsMount()]);
    const { view, s, conversation } = await turn(A, [{ text: "I can see the docs tools." }]);
    expect(view.status).toBe("idle");

    const tools = await offered(s);
    // Asked only once the list was known: the very first request has them.
    expect(tools.get("docs__search")!.parameters).toMatchObject({
      type: "object",
      properties: { query: { type: "string", description: "Words to look for" }, limit: { type: "integer", maximum: 20 } },
      required: ["query"],
    });
    expect(tools.get("docs__search")!.description).toBe('Search the docs. (mount "docs")');
    for (const name of tools.keys()) expect(name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    // Valid names are kept; "page.get" cleans up to a name "page_get" already has, so it is cut and hashed.
    const long = `docs__${LONG_TOOL_NAME.slice(0, 49)}_${hashed(LONG_TOOL_NAME)}`;
    expect(tools.has("docs__page_get")).toBe(true);
    expect(tools.has(`docs__page_get_${hashed("page.get")}`)).toBe(true);
    expect(tools.has("docs__has_space")).toBe(true);
    expect(tools.has(long)).toBe(true);

    const notice = await status(T, A, conversation);
    const mcpTools = [...tools.keys()].filter((n) => n.startsWith("docs__"));
    expect(notice).toContain(`Mount "docs": ${mcpTools.length} tools, listed at`);
    expect(notice).toContain(`"page.get" of mount "docs" is offered as docs__page_get_${hashed("page.get")} (docs__page.get has characters providers refuse).`);
    expect(notice).toContain(`"has space" of mount "docs" is offered as docs__has_space (docs__has space has characters providers refuse).`);
    expect(notice).toContain(`"${LONG_TOOL_NAME}" of mount "docs" is offered as ${long} (docs__${LONG_TOOL_NAME} is longer than 64 characters).`);
  });

  it("status says a new mount's list is being fetched until it is", async () => {
    const A = "newly";
    const { conversation } = await turn(A, [{ text: "no docs yet" }]);
    await mount(T, A, [docsMount()]);
    expect(await status(T, A, conversation)).toContain('Mount "docs": its tool list is being fetched; it offers no tools until then.');
    // The settings' push woke the agent, whose pass asked for the list.
    await waitFor("the list", async () => /Mount "docs": \d+ tools, listed at/.test(await status(T, A, conversation)));
  });

  it("calls a read tool in the session the listing opened: text and structured content reach the model, the image is named (a text-only model is told it cannot see it)", async () => {
    const A = "reader";
    const marker = unique("q");
    const before = (await sessionsStarted()).length;
    await mount(T, A, [docsMount()]);
    const { view, s } = await turn(A, [
      { toolCalls: [{ name: "docs__search", arguments: { query: marker } }, { name: "docs__chart", arguments: { series: marker } }] },
      { text: "Found it." },
    ]);
    expect(view.status).toBe("idle");
    const [search, chart] = toolResults(view);
    expect(search).toMatchObject({ text: `3 pages match "${marker}".`, isError: false });
    expect(chart!.text).toBe(`Chart of ${marker}.\n[image 1: image/png, 70 bytes]\nStructured content: {"series":"${marker}","points":[3,1,4]}`);
    expect(JSON.stringify(await providerRequests(s))).not.toContain("iVBORw0KGgo");
    expect(JSON.stringify(await providerRequests(s))).toContain("(image not shown: this model cannot see images)");
    expect(await serverCalls("search", marker)).toHaveLength(1);
    // The list and both calls shared one session the server issued.
    const started = (await sessionsStarted()).slice(before);
    expect(started).toHaveLength(1);
    expect((await serverCalls("chart", marker))[0]!.session).toBe(started[0]!.session);
  });

  // 400 is what the SDK's servers answer (server-everything among them: see "the reference server" below), 404 the protocol's word.
  for (const answer of ["400", "404", "401-session"] as const) {
    it(`a session the server forgot (answered ${answer}) is renewed and the call is made once`, async () => {
      const A = `forgetful-${answer}`;
      await mount(T, A, [docsMount()]);
      await turn(A, [{ text: "listed" }]);
      const before = (await sessionsStarted()).length;
      await forget(answer);
      const marker = unique("q");
      const { view } = await turn(A, [{ toolCalls: [{ name: "docs__search", arguments: { query: marker } }] }, { text: "ok" }]);
      expect(toolResults(view).at(-1)).toMatchObject({ text: `3 pages match "${marker}".`, isError: false });
      const renewed = (await sessionsStarted()).slice(before);
      expect(renewed).toHaveLength(1);
      expect(await serverCalls("search", marker)).toEqual([expect.objectContaining({ session: renewed[0]!.session })]);
    });
  }

  it("a 401 that does not name the session is a refusal, not a forgotten session: nothing is renewed", async () => {
    const A = "refused";
    await mount(T, A, [docsMount()]);
    await turn(A, [{ text: "listed" }]);
    const before = (await sessionsStarted()).length;
    await forget("401-token");
    const marker = unique("q");
    const { view } = await turn(A, [{ toolCalls: [{ name: "docs__search", arguments: { query: marker } }] }, { text: "refused" }]);
    expect(toolResults(view).at(-1)).toMatchObject({
      isError: true,
      text: `The MCP server at ${HOST} refused the request while calling search: Streamable HTTP error: Error POSTing to endpoint: {"error":"invalid_token","error_description":"The access token has expired"}`,
    });
    expect((await sessionsStarted()).slice(before)).toEqual([]);
    expect(await serverCalls("search", marker)).toEqual([]);
  });

  it("a server that came back with another tool: the call that renews the session has the list read again", async () => {
    const A = "returning";
    const back = unique("back_");
    await mount(T, A, [docsMount()]);
    const first = await turn(A, [{ text: "listed" }]);
    expect((await offered(first.s)).has(`docs__${back}`)).toBe(false);
    await forget("400", back);
    const marker = unique("q");
    await turn(A, [{ toolCalls: [{ name: "docs__search", arguments: { query: marker } }] }, { text: "ok" }]);
    await waitFor("the list read again", async () => (await rows<{ value: string }>(T, A, "SELECT value FROM mount_sessions WHERE alias = 'docs' AND key = 'tool_list'"))[0]?.value.includes(back));
    const next = await turn(A, [{ toolCalls: [{ name: `docs__${back}` }] }, { text: "used it" }]);
    expect((await offered(next.s)).has(`docs__${back}`)).toBe(true);
    expect(toolResults(next.view).at(-1)).toMatchObject({ text: `${back} ran.`, isError: false });
  });

  it("a server's notice that its tools changed has the list fetched again", async () => {
    const A = "growing";
    const fresh = unique("fresh_");
    await mount(T, A, [docsMount()]);
    const { s } = await turn(A, [{ toolCalls: [{ name: "docs__add_tool", arguments: { name: fresh } }] }, { text: "added" }]);
    expect((await offered(s)).has(`docs__${fresh}`)).toBe(false);
    await waitFor("the list fetched again", async () => (await rows<{ value: string }>(T, A, "SELECT value FROM mount_sessions WHERE alias = 'docs' AND key = 'tool_list'"))[0]?.value.includes(fresh));
    const next = await turn(A, [{ toolCalls: [{ name: `docs__${fresh}` }] }, { text: "used it" }]);
    expect(toolResults(next.view).at(-1)).toMatchObject({ text: `${fresh} ran.`, isError: false });
  });

  it("sends the secret in the header the mount names, in place of a configured header of that name", async () => {
    const A = "keyed";
    const marker = unique("q");
    await mount(T, A, [docsMount({ secretHeader: "x-api-key", secretPrefix: "", headers: { "X-Api-Key": "not-this", "x-team": "docs" } })]);
    const { view } = await turn(A, [{ toolCalls: [{ name: "docs__search", arguments: { query: marker } }] }, { text: "ok" }]);
    expect(toolResults(view)[0]).toMatchObject({ text: `3 pages match "${marker}".`, isError: false });
    const calls = await serverCalls("search", marker);
    expect(calls).toHaveLength(1);
    expect([calls[0]!.apiKey, calls[0]!.authorization]).toEqual([TOKEN, undefined]);
  });

  it("falls back to the older HTTP+SSE transport for a server that has only that", async () => {
    const A = "legacy";
    const marker = unique("echo");
    await mount(T, A, [{ alias: "old", plugin: "mcp", config: { url: `${MCP_URL}/sse` }, secret_ref: "MCP_API_TOKEN" }]);
    const { view } = await turn(A, [{ toolCalls: [{ name: "old__echo", arguments: { text: marker } }] }, { text: "echoed" }]);
    expect(toolResults(view)[0]).toMatchObject({ text: `echo: ${marker}`, isError: false });
    expect(await serverCalls("legacy.echo", marker)).toHaveLength(1);
  });
});

describe("policy from the server's annotations", () => {
  it("a mount's policy wins: per-tool entries over annotations, write: approval over an idempotent write", async () => {
    const A = "governed";
    const marker = unique("p");
    await mount(T, A, [docsMount({}, { write: "approval", tools: { delete_page: "allow", search: "deny" } })]);
    const { view } = await turn(A, [
      {
        toolCalls: [
          { name: "docs__delete_page", arguments: { page: marker } },
          { name: "docs__search", arguments: { query: marker } },
          { name: "docs__rename_page", arguments: { page: marker, title: "New" } },
        ],
      },
      { text: "done" },
    ]);
    const [deleted, searched, renamed] = toolResults(view);
    expect(deleted).toMatchObject({ text: `Deleted page ${marker}.`, isError: false });
    expect(searched).toMatchObject({ text: 'Refused: the policy of mount "docs" does not allow docs__search.', isError: true });
    expect(renamed!.text).toMatch(/^Held for approval/);
    expect(await serverCalls("delete_page", marker)).toHaveLength(1);
    expect(await serverCalls("search", marker)).toHaveLength(0);
    expect(await serverCalls("rename_page", marker)).toHaveLength(0);
  });
});

describe("a destructive MCP tool in Slack", () => {
  it("is held, approved from the card, performed once at the server; the bearer secret reaches the server and nothing else", async () => {
    const lines = captureConsole();
    const team = slackId("T");
    const channel = slackId("C");
    const ts = newTs();
    const page = unique("page");
    const s = unique("mcpslack");
    await mount(team, AGENT, [docsMount()]);
    await script(s, [
      { toolCalls: [{ name: "docs__whoami" }, { name: "docs__delete_page", arguments: { page } }] },
      // A careless model: it repeats its tools' results in the thread.
      { echoToolResults: true },
      { text: `Deleted ${page}.` },
    ]);
    await postEvent(messageEnvelope({ team, channel, ts, text: `[s:${s}] delete ${page}`, user: "U_ASKER" }));

    const card = await waitFor("the card in the thread", async () => (await slackCalls(channel, "chat.postMessage")).find(isCard));
    expect(card.body.text).toMatch(/Approval needed: docs__delete_page/);
    expect(JSON.stringify(card.body.blocks)).toContain(page);
    await waitFor("the model's interim answer", async () => (await threadMessages(channel)).some((m) => m.body.markdown_text?.includes("[redacted]")));
    expect(await serverCalls("delete_page", page)).toHaveLength(0);

    // The person who asked may sign their own request.
    expect((await slackClick(team, channel, ts, card.ts!, buttons(card)[0]!.value!, "U_ASKER", unique("resp"))).status).toBe(200);
    await waitFor("the agent's answer", async () => (await threadMessages(channel)).some((m) => m.body.markdown_text === `Deleted ${page}.`));
    await waitFor("the card updated", async () => (await slackCalls(channel, "chat.update")).some((c) => c.body.ts === card.ts && c.body.text?.includes("Approved and performed")));
    const view = await getConversation(team, AGENT, conversationOf(team, channel, ts));
    expect(view.status).toBe("idle");
    expect(await serverCalls("delete_page", page)).toHaveLength(1);

    // The secret reached the server, as the mount's bearer token: the careless tool echoed it, redacted on the way back.
    expect(view.transcript.some((e) => e.role === "tool" && e.text === "You sent: Bearer [redacted]")).toBe(true);
    expect(await serverCalls("whoami")).toEqual([expect.objectContaining({ authorization: `Bearer ${TOKEN}` })]);
    // …and nowhere else: not in the object's tables (transcript, tool list, session), model requests, Slack calls (cards included) or logs.
    const tables = await storedText(team, AGENT);
    expect(tables).toContain("docs__delete_page");
    expect(tables).toContain("Says who the server thinks you are (Bearer [redacted])."); // the careless description, as kept
    const forms = [TOKEN, JSON.stringify(TOKEN).slice(1, -1), JSON.stringify(JSON.stringify(TOKEN)).slice(1, -1), encodeURIComponent(TOKEN)];
    expect(await secretLeaks(forms, { tenant: team, agent: AGENT, scenario: s, channel, lines })).toEqual(NO_LEAKS);
  });
});

describe("a server that fails", () => {
  it("a JSON-RPC error, a call slower than the timeout and a server that is down each give the model a tool error it can read; the turn goes on", async () => {
    const A = "faulty";
    const marker = unique("m");
    await mount(T, A, [docsMount({ timeoutMs: 1000 })]);
    await turn(A, [{ text: "listed" }]);

    const failing = await turn(A, [
      { toolCalls: [{ name: "docs__broken", arguments: { marker } }, { name: "docs__slow", arguments: { marker } }] },
      { text: "I could not get that; carrying on." },
    ]);
    expect(failing.view.status).toBe("idle");
    expect(failing.view.transcript.at(-1)!.text).toBe("I could not get that; carrying on.");
    const [broken, slow] = toolResults(failing.view).slice(-2);
    expect(broken).toMatchObject({ isError: true, text: `The MCP server at ${HOST} answered with an error while calling broken: MCP error -32603: the search index is being rebuilt` });
    expect(slow).toMatchObject({ isError: true, text: `The MCP server at ${HOST} did not answer within 1000 ms while calling slow; whether it acted is unknown.` });
    expect(await serverCalls("broken", marker)).toHaveLength(1);

    await serverDown(true);
    const down = await turn(A, [{ toolCalls: [{ name: "docs__search", arguments: { query: marker } }] }, { text: "The docs server is down." }]);
    expect(down.view.status).toBe("idle");
    expect(down.view.transcript.at(-1)!.text).toBe("The docs server is down.");
    expect(toolResults(down.view).at(-1)!.isError).toBe(true);
    expect(toolResults(down.view).at(-1)!.text).toMatch(new RegExp(`^Could not reach the MCP server at ${HOST} while calling search: `));
  });

  it("a server down when its list is first fetched: the turn goes on without its tools, and status says why", async () => {
    const A = "unlisted";
    await mount(T, A, [docsMount()]);
    await serverDown(true);
    const { view, s, conversation } = await turn(A, [{ text: "No docs today." }]);
    expect(view.status).toBe("idle");
    expect([...(await offered(s)).keys()].filter((n) => n.startsWith("docs__"))).toEqual([]);
    expect(await status(T, A, conversation)).toMatch(new RegExp(`Mount "docs": its tool list could not be fetched \\(Could not reach the MCP server at ${HOST} while listing its tools: .+\\); it offers no tools\\. Next try after `));
  });
});

describe("the reference server, @modelcontextprotocol/server-everything", () => {
  // The npm package itself, in its Streamable HTTP mode, run as a Node process on loopback by test/fakes/everything.mjs.
  const REFERENCE = { alias: "ref", plugin: "mcp", config: { url: E.MCP_EVERYTHING_URL! } };
  /** Kills the server (SIGKILL) and starts it again on the same port: every session it issued is gone. */
  async function restartReference(): Promise<void> {
    const res = await fetch(`${E.MCP_EVERYTHING_CONTROL_URL}/_control/restart`, { method: "POST" });
    expect(res.status, await res.clone().text()).toBe(200);
  }
  const sessionOf = async (name: string) =>
    (JSON.parse((await rows<{ value: string }>(T, name, "SELECT value FROM mount_sessions WHERE alias = 'ref' AND key = 'connection'"))[0]!.value) as { sessionId: string }).sessionId;

  it("offers its tools but the task-only one and the one the mount denies; a call of either by name is refused", async () => {
    const A = "reference";
    await mount(T, A, [{ ...REFERENCE, policy: { tools: { "get-env": "deny" } } }]);
    const { view, s, conversation } = await turn(A, [
      {
        toolCalls: [
          { name: "ref__get-sum", arguments: { a: 2, b: 3 } },
          { name: "ref__get-env" },
          { name: "ref__simulate-research-query", arguments: { topic: "tasks" } },
        ],
      },
      { text: "Two of those were refused." },
    ]);
    expect(view.status).toBe("idle");
    for (const request of [0, 1]) {
      const tools = [...(await offered(s, request)).keys()];
      expect(tools).toEqual(expect.arrayContaining(["ref__echo", "ref__get-sum", "ref__get-tiny-image"]));
      expect(tools).not.toContain("ref__get-env");
      expect(tools).not.toContain("ref__simulate-research-query");
    }
    expect(toolResults(view).map(({ text, isError }) => ({ text, isError }))).toEqual([
      { text: "The sum of 2 and 3 is 5.", isError: false },
      { text: 'Refused: the policy of mount "ref" does not allow ref__get-env.', isError: true },
      { text: 'Refused: ref__simulate-research-query runs only as an MCP task (its execution.taskSupport is "required"), which this runtime does not support.', isError: true },
    ]);
    const notice = await status(T, A, conversation);
    expect(notice).toContain('"simulate-research-query" is not offered: it runs only as an MCP task');
    const offeredCount = [...(await offered(s)).keys()].filter((n) => n.startsWith("ref__")).length;
    expect(notice).toContain(`Mount "ref": ${offeredCount} tools, listed at`);
  });

  it("killed and started again on the same port: the next call renews the session and returns the server's real answer", async () => {
    const A = "survivor";
    await mount(T, A, [REFERENCE]);
    const before = unique("hello");
    const first = await turn(A, [{ toolCalls: [{ name: "ref__echo", arguments: { message: before } }] }, { text: "echoed" }]);
    expect(toolResults(first.view).at(-1)).toMatchObject({ text: `Echo: ${before}`, isError: false });
    const oldSession = await sessionOf(A);

    await restartReference();
    const after = unique("again");
    const second = await turn(A, [{ toolCalls: [{ name: "ref__echo", arguments: { message: after } }] }, { text: "echoed again" }]);
    expect(second.view.status).toBe("idle");
    expect(toolResults(second.view).at(-1)).toMatchObject({ text: `Echo: ${after}`, isError: false });
    const newSession = await sessionOf(A);
    expect(newSession).toMatch(/^[0-9a-f-]{36}$/);
    expect(newSession).not.toBe(oldSession);
  });
});

describe("tool names", () => {
  it("are renamed by one rule: cleaned, cut and hashed when taken or too long; a name taken twice is left out", () => {
    const tools = ["b.c", "b_c", "b_c", "ok-name", "x".repeat(70)].map((name) => ({ name }));
    const long = `a__${"x".repeat(52)}_${hashed("x".repeat(70))}`;
    const { named, notes } = nameTools("a", tools);
    expect(named.map((n) => n.name)).toEqual([`a__b_c_${hashed("b.c")}`, "a__b_c", "a__ok-name", long]);
    expect(long).toHaveLength(64);
    expect(notes).toEqual([
      `"b.c" of mount "a" is offered as a__b_c_${hashed("b.c")} (a__b.c has characters providers refuse).`,
      `"b_c" of mount "a" is left out: it is listed more than once.`,
      `"${"x".repeat(70)}" of mount "a" is offered as ${long} (a__${"x".repeat(70)} is longer than 64 characters).`,
    ]);
  });
});
