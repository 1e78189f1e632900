// The js plugin's door.
export { jsPlugin } from "./plugin.ts";
export { runScript, type ScriptOptions } from "./script-run.ts";
