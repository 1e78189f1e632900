// The layout's rules, checked in `npm test` (scripts/boundaries.mjs): a
// violation fails with the rule's name. Type-only imports count: a circle of
// types is still a circle a reader has to untangle.
/**
 * The runtime's rooms, lowest first: a room imports only rooms below it, so
 * an arrow never points up (docs/design.md, "Rooms"). A new room takes its
 * floor here (test/node/layout.test.mjs checks every room has one).
 */
const FLOORS = ["store", "metering", "effects", "models", "tools", "turns", "control", "feed", "object", "courier", "access", "edge", "responses"];

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...FLOORS.slice(0, -1).map((room, floor) => ({
      name: "no-arrows-up",
      comment: `runtime/${room} imports only the rooms below it (${FLOORS.slice(0, floor).join(", ") || "none"}).`,
      severity: "error",
      from: { path: `^runtime/${room}/` },
      to: { path: `^runtime/(${FLOORS.slice(floor + 1).join("|")})/` },
    })),
    {
      name: "no-circular",
      comment: "No import circles, types included.",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "room-door",
      comment: "A runtime room is entered only through its index.ts.",
      severity: "error",
      from: { path: "^runtime/([^/]+)/" },
      to: { path: "^runtime/[^/]+/", pathNot: ["^runtime/$1/", "^runtime/[^/]+/index\\.ts$"] },
    },
    {
      name: "runtime-door",
      comment: "Outside the runtime (bridges, console, plugins, approvals, lib, worker.ts), the runtime is entered only through runtime/index.ts.",
      severity: "error",
      from: { pathNot: ["^runtime/", "^test/"] },
      to: { path: "^runtime/", pathNot: ["^runtime/index\\.ts$"] },
    },
    {
      name: "tests-through-doors",
      comment: "Tests reach a room through its door (or the runtime's), never a room's internals from outside it.",
      severity: "error",
      from: { path: "^test/" },
      to: { path: "^runtime/[^/]+/", pathNot: ["^runtime/[^/]+/index\\.ts$"] },
    },
    {
      name: "plugins-not-runtime",
      comment: "Plugins know the gateway's contract, never the runtime.",
      severity: "error",
      from: { path: "^plugins/" },
      to: { path: "^runtime/" },
    },
    {
      name: "runtime-not-bridges-or-console",
      comment: "The runtime is handed each bridge's outbound (RuntimeDeps); it imports no bridge and no console.",
      severity: "error",
      from: { path: "^runtime/" },
      to: { path: "^(bridges|console)/" },
    },
    {
      name: "lib-is-a-leaf",
      comment: "lib/ holds helpers every folder may use: it imports nothing of the project outside lib/.",
      severity: "error",
      from: { path: "^lib/" },
      to: { path: "^(runtime|bridges|console|plugins|approvals|machines)/" },
    },
    {
      name: "approvals-below-runtime",
      comment: "Approvals (policy, holds, cards) are used by the runtime, the bridges and the console; they use none of them.",
      severity: "error",
      from: { path: "^approvals/" },
      to: { path: "^(runtime|bridges|console)/" },
    },
    {
      name: "machines-door",
      comment: "Machines (backends and the host) are reached only through machines/index.ts, and know nothing of the runtime, the bridges or the console.",
      severity: "error",
      from: { pathNot: ["^machines/", "^test/"] },
      to: { path: "^machines/", pathNot: ["^machines/index\\.ts$"] },
    },
    {
      name: "machines-below-runtime",
      comment: "A machine backend serves the machine plugin; it imports no runtime, bridge, console or plugin. The machine host is a Node program like the connectors and reads its settings the same way (bridges/shared/connector.mjs).",
      severity: "error",
      from: { path: "^machines/" },
      to: { path: "^(runtime|bridges|console|plugins)/", pathNot: ["^bridges/shared/connector\\.mjs$"] },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    doNotFollow: { path: "node_modules" },
    exclude: { path: "(^|/)node_modules/" },
  },
};
// For test/node/layout.test.mjs; not a setting (dependency-cruiser reads only the enumerable ones).
Object.defineProperty(module.exports, "FLOORS", { value: FLOORS, enumerable: false });
