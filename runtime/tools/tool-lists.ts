// The object's side of discovered tool lists (an MCP server's tools): a pass
// asks for each mount's list when it is due, one fetch per mount at a time; a
// courier fetches it through the gateway, off the object, with the mount as it
// is then; its report keeps the list with the mount and wakes the running
// conversations, so a turn that waited for a first list goes on.
import { ToolList, type Gateway, type Mount } from "../../plugins/index.ts";
import type { Conversations } from "../store/index.ts";
import type { Effects } from "../effects/index.ts";
import type { MountSessions } from "./mount-sessions.ts";

/** What a courier needs to fetch a mount's tool list: the mount and its session state, never a secret value. */
export interface MountWork {
  mount: Mount;
  session: Record<string, unknown>;
}

export interface MountReport {
  /** The session keys the fetch set (the list among them). */
  session: Record<string, unknown>;
}

/** A mount's effect belongs to no conversation. */
const NO_CONVERSATION = "";

export class ToolLists {
  constructor(
    private readonly conversations: Conversations,
    private readonly effects: Effects,
    private readonly sessions: MountSessions,
  ) {}

  /** One fetch per mount whose list is due (a fetch already asked for is not asked again). */
  request(gateway: Gateway): void {
    for (const mount of gateway.toolListsDue(Date.now())) this.effects.add("mount", mount.alias, NO_CONVERSATION);
  }

  /** The fetch's work: the mount as it is now, or null when it is no longer mounted. */
  work(gateway: Gateway, alias: string): MountWork | null {
    const mount = gateway.mounted(alias);
    return mount ? { mount, session: this.sessions.snapshot(alias) } : null;
  }

  /** A courier's result; a second report of one fetch changes nothing. */
  report(alias: string, report: MountReport): boolean {
    if (!this.effects.get("mount", alias)) return false;
    this.sessions.replace(alias, report.session);
    this.effects.done("mount", alias);
    this.wakeRunning();
    return true;
  }

  /** A fetch whose couriers never answered is a failure, tried again later like any other. */
  giveUp(alias: string): void {
    new ToolList(this.sessions.state(alias)).failed("the server did not answer in time", Date.now());
    this.wakeRunning();
  }

  private wakeRunning(): void {
    for (const id of this.conversations.runningIds()) this.conversations.markForPass(id);
  }
}
