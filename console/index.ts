// The web console's public interface: its routes, which worker.ts mounts at /console.
export { consoleRoutes } from "./routes.tsx";
