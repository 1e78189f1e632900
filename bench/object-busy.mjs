// What one agent object recorded of its own busy time (runtime/metering/busy-time.ts),
// read from outside while `wrangler dev` runs, read-only, from its --persist-to
// folder: the hours' total (every handler, overlaps once), the part counted to
// turns, and the named parts that served none. Node 20 has no SQLite module,
// so python3's reads it.
import { execFileSync } from "node:child_process";

const READER = `
import glob, json, os, sqlite3, sys
root, tenant, agent = sys.argv[1:4]
found = None
for f in glob.glob(os.path.join(root, "v3", "do", "*-AgentObject", "*.sqlite")):
    if f.endswith("metadata.sqlite"):
        continue
    db = sqlite3.connect("file:" + f + "?mode=ro", uri=True, timeout=10)
    try:
        meta = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('tenant', 'agent')").fetchall())
        if meta.get("tenant") == tenant and meta.get("agent") == agent:
            found = {
                "hourMs": db.execute("SELECT COALESCE(SUM(busy_ms), 0) FROM busy_hours").fetchone()[0],
                "turnsMs": db.execute("SELECT COALESCE(SUM(busy_ms), 0) FROM busy_turns").fetchone()[0],
                "outside": dict(db.execute("SELECT part, SUM(busy_ms) FROM busy_outside GROUP BY part").fetchall()),
            }
    except sqlite3.OperationalError:
        pass  # an object that never got its schema
    finally:
        db.close()
    if found:
        break
print(json.dumps(found))
`;

/** { hourMs, turnsMs, outside: { part: ms } } of the object of (tenant, agent), or null when it has none yet. */
export function objectBusy(persistDir, tenant, agent) {
  return JSON.parse(execFileSync("python3", ["-c", READER, persistDir, tenant, agent], { encoding: "utf8" }));
}
