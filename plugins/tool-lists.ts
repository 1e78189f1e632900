// A discovered tool list as the gateway keeps it, in the mount's session
// state: the entries, when they were fetched, whether a call was told they
// changed, and the last failure. From these come when the list is due again
// and what `status` says about it.
import type { FetchedTools, SessionState } from "./contract.ts";

/** The session key the gateway keeps the list under (a plugin's own keys are its own). */
const KEY = "tool_list";
/** A failed fetch is tried again after this. */
export const TOOL_LIST_RETRY_MS = 60_000;

interface ListState {
  entries?: unknown[];
  notes?: string[];
  fetchedAt?: number;
  /** A call was told the list changed. */
  changed?: boolean;
  error?: string;
  failedAt?: number;
}

export class ToolList {
  constructor(private readonly session: SessionState) {}

  private get state(): ListState {
    return this.session.get<ListState>(KEY) ?? {};
  }

  /** The entries last fetched; none until a fetch succeeded. */
  entries(): unknown[] {
    return this.state.entries ?? [];
  }

  /** No list yet and no failed attempt: the first fetch is under way (or about to be). */
  firstPending(): boolean {
    const state = this.state;
    return state.entries === undefined && state.error === undefined;
  }

  /** When the list should be fetched: at once when none is known or it changed, after a failure's pause, else at the end of its TTL. */
  dueAt(ttlMs: number): number {
    const state = this.state;
    if (state.failedAt !== undefined) return state.failedAt + TOOL_LIST_RETRY_MS;
    if (state.entries === undefined || state.changed) return 0;
    return (state.fetchedAt ?? 0) + ttlMs;
  }

  fetched(list: FetchedTools, at: number): void {
    this.session.set(KEY, { entries: list.entries, notes: list.notes, fetchedAt: at } satisfies ListState);
  }

  /** A failed fetch keeps the list it had (if any) until one succeeds. */
  failed(reason: string, at: number): void {
    this.session.set(KEY, { ...this.state, error: reason, failedAt: at } satisfies ListState);
  }

  changed(): void {
    this.session.set(KEY, { ...this.state, changed: true } satisfies ListState);
  }

  /** Sentences for `status`. */
  describe(alias: string, offered: number): string[] {
    const state = this.state;
    const at = (t: number | undefined) => new Date(t ?? 0).toISOString();
    if (state.entries === undefined) {
      return state.error === undefined
        ? [`Mount "${alias}": its tool list is being fetched; it offers no tools until then.`]
        : [`Mount "${alias}": its tool list could not be fetched (${state.error}); it offers no tools. Next try after ${at((state.failedAt ?? 0) + TOOL_LIST_RETRY_MS)}.`];
    }
    const changed = state.changed ? " The server said it changed: it is fetched again." : "";
    const failed = state.error === undefined ? "" : ` The last refresh failed (${state.error}); this list is kept until one succeeds.`;
    return [`Mount "${alias}": ${offered} tools, listed at ${at(state.fetchedAt)}.${changed}${failed}`, ...(state.notes ?? [])];
  }
}
