// Makes QuickJS's WebAssembly preemptible (plugins/js/, docs/plugins.md
// "Code mode"): a copy of the quickjs-emscripten wasm in which every loop
// header counts down a fuel global and, when it runs out, calls a new import,
// `antiproton.tick`, which answers the fuel for the next stretch (and, through
// `antiproton.pause`, may suspend the script there).
// Every long computation loops, the interpreter's dispatch and each long
// built-in alike (a BigInt's toString, a regular expression, a sort), so the
// host hears from the script at a steady pace wherever it is, and through
// JSPI can suspend it there (to let the isolate serve others) or end it.
//
//   node scripts/slice-quickjs.mjs          writes plugins/js/quickjs-sliced.wasm
//   node scripts/slice-quickjs.mjs --check  exits 1 if that file is not what this makes
//
// The rewrite is byte-level and small: two function imports appended (every
// defined function's index moves up by two, so calls, exports, element
// segments and ref.func are renumbered), one mutable i32 global appended, and
// the countdown inserted after each `loop`. An instruction it does not know
// (SIMD, exceptions) stops it rather than guessing.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

export const SOURCE = createRequire(import.meta.url).resolve("@jitl/quickjs-wasmfile-release-sync/wasm");
export const TARGET = fileURLToPath(new URL("../plugins/js/quickjs-sliced.wasm", import.meta.url));
/**
 * The two imports the countdown calls: `tick`, an ordinary import that
 * answers the next stretch's fuel, or a negative number when the script
 * should pause here; then `pause`, which the host wraps in
 * WebAssembly.Suspending (JSPI lets only such an import suspend, and only
 * where the wasm was entered through WebAssembly.promising).
 */
export const IMPORT_MODULE = "antiproton";
const IMPORTS = ["tick", "pause"];

class Reader {
  constructor(bytes, pos = 0) {
    this.bytes = bytes;
    this.pos = pos;
  }
  byte() {
    if (this.pos >= this.bytes.length) throw new Error("unexpected end of the module");
    return this.bytes[this.pos++];
  }
  u32() {
    let result = 0;
    let shift = 0;
    for (;;) {
      const b = this.byte();
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
    }
  }
  /** A signed LEB (i32, i64, s33): only skipped, never needed as a number. */
  skipSigned() {
    while (this.byte() & 0x80);
  }
  skip(n) {
    this.pos += n;
  }
  name() {
    const n = this.u32();
    const text = new TextDecoder().decode(this.bytes.subarray(this.pos, this.pos + n));
    this.pos += n;
    return text;
  }
}

function u32(n) {
  const out = [];
  do {
    let b = n & 0x7f;
    n = Math.floor(n / 128);
    if (n !== 0) b |= 0x80;
    out.push(b);
  } while (n !== 0);
  return out;
}
const nameBytes = (text) => {
  const b = new TextEncoder().encode(text);
  return [...u32(b.length), ...b];
};
/** Bytes written in pieces (a function body can be larger than a spread argument list may be). */
class Writer {
  chunks = [];
  length = 0;
  push(...values) {
    this.add(Uint8Array.from(values));
  }
  add(chunk) {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }
  bytes() {
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
}

const VALTYPES = new Set([0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f]);
function skipBlockType(r) {
  const b = r.bytes[r.pos];
  if (b === 0x40 || VALTYPES.has(b)) r.skip(1);
  else r.skipSigned();
}
const skipMemarg = (r) => {
  const align = r.u32();
  if (align & 0x40) r.u32(); // multi-memory: a memory index follows
  r.u32();
};

/**
 * Walks one instruction from `r.pos`: skips its immediates and answers what
 * the rewrite needs of it (a function index, branch labels, a block). An
 * instruction it does not know stops the rewrite.
 */
function instruction(r) {
  const start = r.pos;
  const op = r.byte();
  const found = { op, start };
  if (op === 0x10 || op === 0x12 || op === 0xd2) found.func = r.u32();
  else if (op === 0x02 || op === 0x03 || op === 0x04) skipBlockType(r);
  else if (op === 0x0c || op === 0x0d) found.labels = [r.u32()];
  else if (op === 0x0e) {
    const n = r.u32();
    found.labels = Array.from({ length: n + 1 }, () => r.u32());
  } else if ((op >= 0x20 && op <= 0x26) || op === 0x3f || op === 0x40 || op === 0xd0) r.u32();
  else if (op === 0x11 || op === 0x13) {
    r.u32();
    r.u32();
  } else if (op === 0x1c) r.skip(r.u32());
  else if (op >= 0x28 && op <= 0x3e) skipMemarg(r);
  else if (op === 0x41 || op === 0x42) r.skipSigned();
  else if (op === 0x43) r.skip(4);
  else if (op === 0x44) r.skip(8);
  else if (op === 0xfc) {
    const sub = r.u32();
    if (sub <= 7) {
      // saturating truncations: no immediates
    } else if (sub === 8 || sub === 10 || sub === 12 || sub === 14) {
      r.u32();
      r.u32();
    } else if (sub === 9 || sub === 11 || sub === 13 || (sub >= 15 && sub <= 17)) r.u32();
    else throw new Error(`unknown 0xfc instruction ${sub} at ${start}`);
  } else if (!(op <= 0x01 || op === 0x05 || op === 0x0b || op === 0x0f || op === 0x1a || op === 0x1b || (op >= 0x45 && op <= 0xc4) || op === 0xd1)) {
    throw new Error(`instruction 0x${op.toString(16)} at ${start} is not one this rewrite knows`);
  }
  return found;
}

/**
 * Copies one function body, renumbering function indices and inserting the
 * countdown after each loop. The count lives in a local of the function (a
 * register, so a tight loop pays little for it) and in the fuel global across
 * calls: stored before each call made inside a loop and each way out, loaded
 * at entry and after such a call. A function without a loop only has its
 * calls renumbered: it neither counts nor disturbs the count. Returns the new
 * bytes and the number of loops.
 */
function rewriteBody(bytes, params, shift, fuel, tick) {
  const r = new Reader(bytes);
  const out = new Writer();
  const copyFrom = (start) => out.add(bytes.subarray(start, r.pos));
  const groups = r.u32();
  let locals = 0;
  for (let i = 0; i < groups; i++) {
    locals += r.u32();
    r.byte();
  }
  const code = r.pos;
  const hasLoop = (() => {
    for (const scan = new Reader(bytes, code); scan.pos < bytes.length; ) if (instruction(scan).op === 0x03) return true;
    return false;
  })();
  if (!hasLoop) {
    copyFrom(0);
    while (r.pos < bytes.length) {
      const { op, start, func } = instruction(r);
      if (func !== undefined) out.push(op, ...u32(shift(func)));
      else copyFrom(start);
    }
    return { bytes: out.bytes(), loops: 0 };
  }
  // The locals as they are, and one more i32: the count.
  out.push(...u32(groups + 1));
  out.add(bytes.subarray(u32(groups).length, code));
  out.push(0x01, 0x7f);
  const count = params + locals;
  const load = [0x23, ...u32(fuel), 0x21, ...u32(count)];
  const store = [0x20, ...u32(count), 0x24, ...u32(fuel)];
  const get = [0x20, ...u32(count)];
  const set = [0x21, ...u32(count)];
  // if count { count -= 1 } else { count = tick(); if count < 0 { count = pause() } }
  const countdown = [...get, 0x04, 0x40, ...get, 0x41, 0x01, 0x6b, ...set, 0x05, 0x10, ...u32(tick), ...set, ...get, 0x41, 0x00, 0x48, 0x04, 0x40, 0x10, ...u32(tick + 1), ...set, 0x0b, 0x0b];
  out.push(...load);
  let loops = 0;
  const open = []; // the blocks open, each true for a loop; a branch to label open.length leaves the function
  while (r.pos < bytes.length) {
    const { op, start, func, labels } = instruction(r);
    const depth = open.length;
    const leaves = op === 0x0f || op === 0x12 || op === 0x13 || (op === 0x0b && depth === 0) || (labels !== undefined && labels.includes(depth));
    const callsInLoop = (op === 0x10 || op === 0x11) && open.includes(true);
    if (leaves || callsInLoop) out.push(...store);
    if (func !== undefined) out.push(op, ...u32(shift(func)));
    else copyFrom(start);
    if (callsInLoop) out.push(...load);
    if (op === 0x02 || op === 0x03 || op === 0x04) open.push(op === 0x03);
    else if (op === 0x0b) open.pop();
    if (op === 0x03) {
      out.push(...countdown);
      loops++;
    }
  }
  return { bytes: out.bytes(), loops };
}

/** The instrumented module's bytes, and what was changed. */
export function sliceQuickJS(input) {
  const bytes = new Uint8Array(input);
  const r = new Reader(bytes, 8);
  const sections = [];
  while (r.pos < bytes.length) {
    const id = r.byte();
    const size = r.u32();
    sections.push({ id, body: bytes.subarray(r.pos, r.pos + size) });
    r.skip(size);
  }
  const find = (id) => sections.find((s) => s.id === id);
  if (sections.some((s) => s.id === 0 && new Reader(s.body).name() === "name")) throw new Error("a name section would need renumbering too");

  // Types: reuse or append `() -> i32` for the tick.
  const types = new Reader(find(1).body);
  const typeCount = types.u32();
  const paramCounts = [];
  let tickType = -1;
  for (let i = 0; i < typeCount; i++) {
    if (types.byte() !== 0x60) throw new Error("unexpected type form");
    const params = types.u32();
    paramCounts.push(params);
    types.skip(params);
    const results = types.u32();
    const resultType = results === 1 ? types.bytes[types.pos] : undefined;
    types.skip(results);
    if (params === 0 && results === 1 && resultType === 0x7f && tickType < 0) tickType = i;
  }
  if (tickType < 0) {
    tickType = typeCount;
    find(1).body = new Uint8Array([...u32(typeCount + 1), ...find(1).body.subarray(u32(typeCount).length), 0x60, 0x00, 0x01, 0x7f]);
  }

  // Imports: count the functions and globals imported, append the tick.
  const imports = new Reader(find(2).body);
  const importCount = imports.u32();
  let importedFunctions = 0;
  let importedGlobals = 0;
  for (let i = 0; i < importCount; i++) {
    imports.name();
    imports.name();
    const kind = imports.byte();
    if (kind === 0x00) {
      imports.u32();
      importedFunctions++;
    } else if (kind === 0x01) {
      imports.byte();
      const flags = imports.u32();
      imports.u32();
      if (flags & 1) imports.u32();
    } else if (kind === 0x02) {
      const flags = imports.u32();
      imports.u32();
      if (flags & 1) imports.u32();
    } else if (kind === 0x03) {
      imports.byte();
      imports.byte();
      importedGlobals++;
    } else throw new Error(`unexpected import kind ${kind}`);
  }
  // Appended after the imported functions: tick, then pause; the defined ones move up by two.
  const tick = importedFunctions;
  const shift = (index) => (index >= tick ? index + IMPORTS.length : index);
  const appended = IMPORTS.flatMap((name) => [...nameBytes(IMPORT_MODULE), ...nameBytes(name), 0x00, ...u32(tickType)]);
  find(2).body = new Uint8Array([...u32(importCount + IMPORTS.length), ...find(2).body.subarray(u32(importCount).length), ...appended]);

  // Globals: append the fuel, a mutable i32 starting at 0 (the first loop ticks).
  const globalsSection = find(6);
  const globalCount = globalsSection ? new Reader(globalsSection.body).u32() : 0;
  const fuel = importedGlobals + globalCount;
  const fuelGlobal = [0x7f, 0x01, 0x41, 0x00, 0x0b];
  if (globalsSection) globalsSection.body = new Uint8Array([...u32(globalCount + 1), ...globalsSection.body.subarray(u32(globalCount).length), ...fuelGlobal]);
  else throw new Error("no global section (the module has no stack pointer?)");

  // Exports and the start function: renumbered.
  const exportsIn = new Reader(find(7).body);
  const exportCount = exportsIn.u32();
  const exportsOut = [...u32(exportCount)];
  for (let i = 0; i < exportCount; i++) {
    const name = exportsIn.name();
    const kind = exportsIn.byte();
    const index = exportsIn.u32();
    exportsOut.push(...nameBytes(name), kind, ...u32(kind === 0x00 ? shift(index) : index));
  }
  find(7).body = new Uint8Array(exportsOut);
  const start = find(8);
  if (start) start.body = new Uint8Array(u32(shift(new Reader(start.body).u32())));

  // Element segments: only the simple kinds emscripten writes (active, function indices).
  const elements = find(9);
  if (elements) {
    const er = new Reader(elements.body);
    const count = er.u32();
    const out = [...u32(count)];
    for (let i = 0; i < count; i++) {
      const flags = er.u32();
      if (flags !== 0) throw new Error(`element segment kind ${flags} is not one this rewrite knows`);
      const offsetStart = er.pos;
      // The offset: one constant instruction and end.
      const op = er.byte();
      if (op === 0x41) er.skipSigned();
      else if (op === 0x23) er.u32();
      else throw new Error("unexpected element offset");
      if (er.byte() !== 0x0b) throw new Error("unexpected element offset end");
      out.push(flags, ...er.bytes.subarray(offsetStart, er.pos));
      const n = er.u32();
      out.push(...u32(n));
      for (let j = 0; j < n; j++) out.push(...u32(shift(er.u32())));
    }
    elements.body = new Uint8Array(out);
  }

  // The type of each defined function, for its parameter count (its locals are numbered after them).
  const functions = new Reader(find(3).body);
  const functionTypes = Array.from({ length: functions.u32() }, () => functions.u32());

  // Code: every body rewritten.
  const code = find(10);
  const cr = new Reader(code.body);
  const bodies = cr.u32();
  const codeOut = new Writer();
  codeOut.push(...u32(bodies));
  let loops = 0;
  for (let i = 0; i < bodies; i++) {
    const size = cr.u32();
    const rewritten = rewriteBody(cr.bytes.subarray(cr.pos, cr.pos + size), paramCounts[functionTypes[i]], shift, fuel, tick);
    cr.skip(size);
    codeOut.push(...u32(rewritten.bytes.length));
    codeOut.add(rewritten.bytes);
    loops += rewritten.loops;
  }
  code.body = codeOut.bytes();

  const out = new Writer();
  out.add(bytes.subarray(0, 8));
  for (const s of sections) {
    out.push(s.id, ...u32(s.body.length));
    out.add(s.body);
  }
  return { bytes: out.bytes(), loops, functions: bodies };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { bytes, loops, functions } = sliceQuickJS(readFileSync(SOURCE));
  if (process.argv.includes("--check")) {
    let current;
    try {
      current = readFileSync(TARGET);
    } catch {
      current = Buffer.alloc(0);
    }
    if (!Buffer.from(bytes).equals(current)) {
      console.error(`${TARGET} is not the sliced build of ${SOURCE}: run node scripts/slice-quickjs.mjs`);
      process.exit(1);
    }
  } else {
    writeFileSync(TARGET, bytes);
    console.log(`wrote ${TARGET}: ${loops} loops in ${functions} functions count down to ${IMPORT_MODULE}.${IMPORTS[0]}`);
  }
}
