// Every chat bridge the Worker serves: its routes and its outbound.
import { discord } from "./discord/index.ts";
import { gchat } from "./gchat/index.ts";
import type { ChatBridge } from "./shared/bridge.ts";
import { slack } from "./slack/index.ts";
import { teams } from "./teams/index.ts";
import { telegram } from "./telegram/index.ts";
import { webhook } from "./webhook/index.ts";

export type { ChatBridge } from "./shared/bridge.ts";

/** Every bridge, one line each: a new platform is a folder here and its name in this list. */
export const bridges: ChatBridge[] = [discord, gchat, slack, teams, telegram, webhook];
