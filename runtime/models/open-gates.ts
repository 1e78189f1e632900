// An isolate's view of its keys' gates (runtime/models/gate.ts), so the gate,
// one object per key shared by every tenant, is not asked before every call: a
// gate's "go" (open, no probe) is trusted by the isolate that heard it for
// OPEN_TRUST_MS, and any 429 the isolate sees closes its view of that key at
// once, before the gate is told. A key not trusted open asks its gate, as
// every call did before. docs/design.md ("The deployment's objects off a
// call's way") says what an isolate that did not see the 429 may still send.

/** How long an isolate trusts a gate's "go" without asking again. */
export const OPEN_TRUST_MS = 1_000;

/** Gate name → until when its "go" is trusted here. */
const openUntil = new Map<string, number>();
/** 429s this isolate has seen: a "go" asked for before the latest one is not trusted (it may predate the wait). */
let limitsSeen = 0;

/** Whether a call with this gate's key may go without asking the gate. */
export function trustedOpen(gate: string): boolean {
  const until = openUntil.get(gate);
  if (until !== undefined && Date.now() >= until) openUntil.delete(gate);
  return until !== undefined && Date.now() < until;
}

/** Marks the moment the gate is asked: pass it to `heardOpen` with the gate's answer. */
export function askingGate(): number {
  return limitsSeen;
}

/** The gate said "go" (no probe): trusted for OPEN_TRUST_MS, unless a 429 was seen since it was asked. */
export function heardOpen(gate: string, asked: number): void {
  if (asked === limitsSeen) openUntil.set(gate, Date.now() + OPEN_TRUST_MS);
}

/** A call with this gate's key was refused for its rate limit: no call here goes on trust any more. */
export function sawLimit(gate: string): void {
  limitsSeen++;
  openUntil.delete(gate);
}
