// A provider call as a courier makes it: through the gate of the key it is
// made with (no call while the provider has told that key to wait; a gate
// this isolate found open is asked again behind the call, not before it:
// open-gates.ts), with the
// answer the provider was paid for (whatever the call's outcome) for the
// courier to count in the ledgers, and a rate limit turned into a time to
// come back rather than a failed attempt.
import type { AssistantMessage } from "@mariozechner/pi-ai";
import { apiKey, callModel, type CallOptions, type ProviderCall } from "./call.ts";
import { retryBaseSeconds } from "./config.ts";
import { gateName, gateStub } from "./gate.ts";
import { askAgain, askingGate, heard, sawLimit, trustedOpen } from "./open-gates.ts";
import type { ModelRequest } from "./request.ts";
import type { ModelChoice } from "./types.ts";

/** A call's outcome, and what it was paid for (an answer with tokens, even one whose call failed after it began). */
export interface GatedCall {
  call: ProviderCall;
  paid?: AssistantMessage;
}

export async function callProvider(env: Env, choice: ModelChoice, request: ModelRequest, opts: CallOptions = {}): Promise<GatedCall> {
  if (choice.kind === "local") return { call: await callModel(env, choice, request, opts) };
  const name = await gateName(choice.provider.id, opts.key ?? apiKey(env, choice));
  const gate = gateStub(env, name);
  let probe: string | undefined;
  if (trustedOpen(name)) {
    if (askAgain(name)) {
      const asked = askingGate(name);
      // Not awaited: the call goes on the view; the answer is for the calls after it.
      void gate.isOpen().then(
        (open) => heard(name, open, asked),
        (err: unknown) => console.error("models: the provider gate could not be asked again", err),
      );
    }
  } else {
    const asked = askingGate(name);
    const admission = await gate.admit();
    if (!admission.go) return { call: { kind: "limited", error: "the key waits out a rate limit the provider announced", until: admission.until } };
    probe = admission.probe;
    // The first call after a wait is the gate's probe: the calls after it ask until the gate has its answer.
    if (!probe) heard(name, true, asked);
  }
  let probeTold = false;
  // The first call after a wait lets the others go as soon as its answer begins, not when it ends.
  const tellProbe = async () => {
    if (!probe || probeTold) return;
    probeTold = true;
    await gate.answered(probe);
  };
  let answer: AssistantMessage | undefined;
  const call = await callModel(env, choice, request, { ...opts, ...(probe ? { onAccepted: tellProbe } : {}), onAnswer: (message) => (answer = message) });
  const paid = answer && paidTokens(answer) > 0 ? { paid: answer } : {};
  if (call.kind === "retry" && call.status === 429) {
    sawLimit(name);
    return { call: { kind: "limited", error: call.error, until: await gate.limited(probe, call.retryAfterSeconds, retryBaseSeconds(env)) }, ...paid };
  }
  await tellProbe();
  return { call, ...paid };
}

function paidTokens(message: AssistantMessage): number {
  const { input, output, cacheRead, cacheWrite } = message.usage;
  return input + output + cacheRead + cacheWrite;
}
