// A long past for the load section, made in the object's own SQLite file: the
// conversations seeded through the Agents API (real turns, real rows) are
// copied under new ids until the object holds `target` of them, with their
// log, model jobs, tool calls and inbound ids. Seeding 100k conversations
// through the API would take hours here (about 10 a second); the copies are
// the same rows a turn writes, so every query and index meets the same data.
// Run on a stopped `wrangler dev`'s --persist-to folder. Node 20 has no SQLite
// module, so python3's writes it.
import { execFileSync } from "node:child_process";

const WRITER = `
import glob, json, os, sqlite3, sys
root, prefix, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
files = [f for f in glob.glob(os.path.join(root, "v3", "do", "*AgentObject*", "*.sqlite")) if not f.endswith("metadata.sqlite")]
def seeded(f):
    db = sqlite3.connect(f, timeout=30)
    try:
        return db.execute("SELECT COUNT(*) FROM conversations WHERE id LIKE ? AND id NOT LIKE '%~%'", (prefix + "%",)).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        db.close()
path = max(files, key=seeded)
db = sqlite3.connect(path, timeout=30)
base = db.execute("SELECT COUNT(*) FROM conversations WHERE id LIKE ? AND id NOT LIKE '%~%'", (prefix + "%",)).fetchone()[0]
# table -> (columns copied with a suffix, columns left out so SQLite numbers them)
TABLES = {
    "conversations": (["id"], []),
    "log": (["conversation"], ["seq"]),
    "model_jobs": (["id", "conversation"], []),
    "tool_calls": (["key", "conversation"], []),
    "inbound": (["event_id", "conversation"], []),
}
copies = max(0, -(-target // base) - 1)
for table, (renamed, omitted) in TABLES.items():
    cols = [r[1] for r in db.execute(f"PRAGMA table_info({table})") if r[1] not in omitted]
    key = "id" if table == "conversations" else "conversation"
    for k in range(1, copies + 1):
        select = ", ".join(f"{c} || '~{k}'" if c in renamed else c for c in cols)
        db.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {table} WHERE {key} LIKE ? AND {key} NOT LIKE '%~%'", (prefix + "%",))
db.commit()
counts = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("conversations", "model_jobs", "log")}
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
print(json.dumps({"base": base, "copies": copies, **counts}))
`;

/** Copies the conversations whose id starts with `prefix` until about `target` exist; returns the object's row counts. */
export function amplifyHistory(persistDir, prefix, target) {
  return JSON.parse(execFileSync("python3", ["-c", WRITER, persistDir, prefix, String(target)], { encoding: "utf8", maxBuffer: 16 << 20 }));
}
