// An isolate's view of its keys' gates (runtime/models/gate.ts), so the gate,
// one object per key shared by every tenant, is not on a call's way: a gate
// this isolate heard open lets its calls go without asking, and is asked again
// behind them (not awaited) once the view is OPEN_FRESH_MS old; any 429 the
// isolate sees, or a "closed" from that asking, closes its view at once. A key
// not seen open asks its gate before the call, as every call did before.
// docs/design.md ("The deployment's objects off a call's way") says what an
// isolate that did not see the 429 may still send.

/** How old a view of an open gate may grow before the gate is asked again (behind the call that finds it so). */
export const OPEN_FRESH_MS = 1_000;

/** Gate name → when this isolate last heard it open (asked for after every 429 seen here). */
const heardAt = new Map<string, number>();
/** Gate name → 429s this isolate has seen with its key: a "go" asked for before the latest one is not trusted (it may predate the wait). */
const limitsSeen = new Map<string, number>();

/** Whether a call with this gate's key may go without waiting for the gate. */
export function trustedOpen(gate: string): boolean {
  return heardAt.has(gate);
}

/** Whether the view of an open gate is old enough to ask the gate again (behind the call); marks it asked, so one call at a time asks. */
export function askAgain(gate: string): boolean {
  const at = heardAt.get(gate);
  if (at === undefined || Date.now() - at < OPEN_FRESH_MS) return false;
  heardAt.set(gate, Date.now());
  return true;
}

/** Marks the moment the gate is asked: pass it to `heard` with the gate's answer. */
export function askingGate(gate: string): number {
  return limitsSeen.get(gate) ?? 0;
}

/**
 * The gate's answer: open (kept, unless a 429 was seen here since it was
 * asked) or not (the view closes: the next call asks before it goes). A view
 * that is already open keeps its age from when askAgain asked, not from when
 * the answer came, so a slow answer never makes the view look fresher.
 */
export function heard(gate: string, open: boolean, asked: number): void {
  if (!open) heardAt.delete(gate);
  else if (asked === (limitsSeen.get(gate) ?? 0) && !heardAt.has(gate)) heardAt.set(gate, Date.now());
}

/** A call with this gate's key was refused for its rate limit: no call here goes on the view any more. */
export function sawLimit(gate: string): void {
  limitsSeen.set(gate, (limitsSeen.get(gate) ?? 0) + 1);
  heardAt.delete(gate);
}
