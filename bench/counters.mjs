// What `wrangler dev` keeps on disk, read from outside while it runs (read-only):
// the alarms workerd has armed (each class's metadata.sqlite, table _cf_ALARM)
// and the counters every AgentObject keeps itself (runtime/metering/busy-time.ts:
// busy_hours.passes counts alarm passes, busy_hours.handlers every handler
// call, passes included). Node 20 has no SQLite module, so python3's reads it.
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";

const READER = `
import glob, json, os, sqlite3, sys
root = os.path.join(sys.argv[1], "v3", "do")
armed_only = len(sys.argv) > 2 and sys.argv[2] == "armed"
out = {"armed": 0, "passes": 0, "handlers": 0, "objects": {}, "armedBy": {}}
def ro(path):
    return sqlite3.connect("file:" + path + "?mode=ro", uri=True, timeout=10)
for folder in sorted(glob.glob(os.path.join(root, "*"))):
    cls = os.path.basename(folder).split("-", 1)[-1]
    files = [f for f in glob.glob(os.path.join(folder, "*.sqlite")) if not f.endswith("metadata.sqlite")]
    out["objects"][cls] = len(files)
    meta = os.path.join(folder, "metadata.sqlite")
    if os.path.exists(meta):
        db = ro(meta)
        n = db.execute("SELECT COUNT(*) FROM _cf_ALARM WHERE scheduled_time IS NOT NULL").fetchone()[0]
        db.close()
        out["armed"] += n
        out["armedBy"][cls] = n
    if cls != "AgentObject" or armed_only:
        continue
    for f in files:
        db = ro(f)
        try:
            p, h = db.execute("SELECT COALESCE(SUM(passes), 0), COALESCE(SUM(handlers), 0) FROM busy_hours").fetchone()
            out["passes"] += p
            out["handlers"] += h
        except sqlite3.OperationalError:
            pass  # an object that never got its schema
        db.close()
print(json.dumps(out))
`;

/** { armed, passes, handlers, objects: {class: count}, armedBy: {class: count} } for a `--persist-to` folder. */
export function objectCounters(persistDir) {
  return JSON.parse(execFileSync("python3", ["-c", READER, persistDir], { encoding: "utf8", maxBuffer: 16 << 20 }));
}

/**
 * The alarms armed in every class (one metadata file each, however many
 * objects): cheap enough to poll, and read without blocking the fakes that
 * share this process.
 */
export async function armedAlarms(persistDir) {
  const { stdout } = await promisify(execFile)("python3", ["-c", READER, persistDir, "armed"], { encoding: "utf8", maxBuffer: 16 << 20 });
  return JSON.parse(stdout).armed;
}
