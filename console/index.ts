// The web console's public interface: its routes and the API reference page, which worker.ts mounts at /console, and its sessions' object.
export { consoleRoutes } from "./routes.tsx";
export { referenceRoutes } from "./reference.tsx";
export { ConsoleSession } from "./session-object.ts";
