// The web console's public interface: its routes and the API reference page, which worker.ts mounts at /console.
export { consoleRoutes } from "./routes.tsx";
export { referenceRoutes } from "./reference.tsx";
