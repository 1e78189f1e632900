// Code mode, the courier's side: a script's tool calls are numbered in the
// order it makes them and each is put to the agent's object
// (runtime/tools/script-calls.ts), which answers it or hands it back to perform here.
import type { ToolCaller, ToolOutput } from "../../plugins/index.ts";
import { type AgentObject, agentStub } from "../object/index.ts";
import type { Route } from "../chat.ts";
import type { ScriptAnswer, ScriptCall, ToolReport, ToolWork } from "../tools/index.ts";

/**
 * The courier's side, handed to a script through the gateway: numbers the
 * script's calls, asks the object about each, performs those handed back and
 * reports them. If the object cannot be reached, the script is stopped and its
 * task tried again later (`unreachable`), where the re-run gets recorded answers.
 */
export class ScriptCaller {
  private readonly route: Route;
  unreachable: unknown = null;

  constructor(
    private readonly env: Env,
    route: Route,
    private readonly perform: (work: ToolWork) => Promise<ToolReport>,
  ) {
    this.route = { tenant: route.tenant, agent: route.agent };
  }

  /** The caller for one script, the one whose own call has journal key `parentKey`. */
  forScript(parentKey: string): ToolCaller {
    let made = 0;
    return {
      call: (alias, tool, args) => {
        // Numbered now, synchronously, in the order the script makes its calls.
        const n = ++made;
        return this.ask({ parentKey, n, alias, tool, args }).catch((err: unknown) => {
          this.unreachable ??= err;
          throw err;
        });
      },
    };
  }

  private async ask(request: ScriptCall): Promise<ToolOutput> {
    // RPC's types drop union members that hold `unknown` (arguments, session values): they are plain JSON here.
    const answer = (await this.agent().claimScriptCall(this.route, request)) as ScriptAnswer;
    if (answer.kind === "answer") return answer.output;
    const report = await this.perform(answer.work);
    const key = answer.work.scope.callKey;
    // The outcome is in hand: a report that fails because the object was reset meanwhile is made once more on a fresh stub.
    return this.agent()
      .reportScriptCall(this.route, key, report)
      .catch(() => this.agent().reportScriptCall(this.route, key, report));
  }

  private agent(): DurableObjectStub<AgentObject> {
    return agentStub(this.env, this.route);
  }
}
