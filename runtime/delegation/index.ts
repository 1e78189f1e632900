// The delegation room: subagents. A parent's `delegate` call runs a child
// conversation of the same object; the child's answer is the call's result.
export { CHILD_ID } from "./delegate-tool.ts";
export { Delegation, type Family } from "./delegation.ts";
