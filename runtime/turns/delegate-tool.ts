// The `delegate` tool as the model sees it, its arguments, and how a child
// run's conversation is named: `<parent>~child-<n>`. No bridge or API can name
// such a conversation (runtime/edge CONVERSATION_ID has no "~"), so nobody
// but its parent can start, steer or message a child.
import * as z from "zod";
import type { ModelTool } from "../../plugins/index.ts";

export const DELEGATE = "delegate";
/** Children of one parent turn running at once; the next waits for a slot. */
export const CHILDREN_AT_ONCE = 3;

export const delegateTool: ModelTool = {
  name: DELEGATE,
  description:
    `Hand a self-contained task to a child run of yourself; its final answer is the result. Up to ${CHILDREN_AT_ONCE} run at once: call it several times in one step to work in parallel. ` +
    "The child sees only `instructions` and the tools of `mounts` (aliases; default all of yours), and cannot delegate.",
  parameters: {
    type: "object",
    properties: { instructions: { type: "string" }, mounts: { type: "array", items: { type: "string" } } },
    required: ["instructions"],
    additionalProperties: false,
  },
};

export const delegateArgs = z
  .object({
    instructions: z.string().trim().min(1, "instructions: say what the child should do").max(20_000),
    mounts: z.array(z.string().min(1)).max(50).optional(),
  })
  .strict();

/** A child's conversation id: its parent's and its number among the parent's children. */
export const childId = (parent: string, n: number) => `${parent}~child-${n}`;

/** A conversation id a child may have (read through the Agents API and the console, never written to). */
export const CHILD_ID = /^[A-Za-z0-9][A-Za-z0-9:._-]{0,199}~child-\d{1,6}$/;
