// What the turn machine asks of delegation (runtime/turns/delegation.ts, above it): the
// object hands it the delegation's verbs, as it hands the approvals glue the
// turns' (docs/design.md, "Subagents").
import type { Gateway, ModelTool } from "../../plugins/index.ts";
import type { ReplyAddress } from "../chat.ts";
import type { ConversationRow } from "../store/index.ts";

/** `restarted`: stopped by a second message under the `interrupt` strategy, which starts the next turn. */
export type TurnOutcome = "done" | "stopped" | "restarted" | "failed" | "compacted" | "unchanged";

export interface Children {
  /** The tools `conv`'s model is offered: a child's are its mounts' (never `delegate`); any other conversation's gain `delegate`. */
  toolsOf(conv: ConversationRow, gateway: Gateway): ModelTool[];
  /** Whether `conv` is a child run (its model calls are counted as a child's). */
  isChild(conv: ConversationRow): boolean;
  /** Why a child's turn may make no further model call (its step limit), or null. */
  limitReached(conv: ConversationRow): string | null;
  /** A turn ended, in the caller's transaction: a child's outcome answers its parent's call, once. */
  ended(conv: ConversationRow, outcome: TurnOutcome, text: string): void;
  /** A turn is cut short: the children it started stop first, each call answered. */
  cut(conv: ConversationRow): void;
  /** Where a child's approval cards are shown: its parent's chat (null for any other conversation). */
  surfaceOf(conv: ConversationRow): ReplyAddress | null;
}
