// The price of the sandbox's countdown (scripts/slice-quickjs.mjs): the same
// scripts in the installed QuickJS and in the sliced build, interleaved, in
// this Node process. Node 20 has no JSPI, so the sliced build's tick only
// hands back fuel here and never pauses: this is the countdown alone, the
// pauses (a macrotask every ~10 ms) come on top in workerd.
import { readFileSync } from "node:fs";
import { newQuickJSWASMModuleFromVariant, newVariant } from "quickjs-emscripten-core";
import releaseSyncVariant from "@jitl/quickjs-wasmfile-release-sync";
import { IMPORT_MODULE, SOURCE, TARGET } from "../scripts/slice-quickjs.mjs";

export const WORKLOADS = {
  "a tight loop (3e6 additions)": "let q = 0; for (let i = 0; i < 3e6; i++) q += i; q",
  "BigInt: (10n ** 30000n).toString()": "(10n ** 30000n).toString().length",
  "objects: JSON of 1e5 small objects": "JSON.stringify(Array.from({ length: 1e5 }, (_, i) => ({ i, s: String(i) }))).length",
  "a regular expression over 1 MB": "('ab'.repeat(5e5) + 'c').match(/(a|b)*c/)[0].length",
};

const FUEL = 10_000;

async function quickjs(wasm) {
  const module = new WebAssembly.Module(readFileSync(wasm));
  const variant = newVariant(releaseSyncVariant, {
    emscriptenModule: {
      instantiateWasm(imports, onSuccess) {
        const instance = new WebAssembly.Instance(module, { ...imports, [IMPORT_MODULE]: { tick: () => FUEL, pause: () => FUEL } });
        onSuccess(instance);
        return instance.exports;
      },
    },
  });
  return newQuickJSWASMModuleFromVariant(variant);
}

/** ms for `code` in a fresh runtime of `module`. */
function time(module, code) {
  const vm = module.newContext();
  try {
    const start = performance.now();
    const result = vm.evalCode(code);
    const ms = performance.now() - start;
    if (result.error) throw new Error(`${code}: ${JSON.stringify(vm.dump(result.error))}`);
    result.value.dispose();
    return ms;
  } finally {
    vm.dispose();
  }
}

/** For each workload: per round, sliced ms / stock ms, the two run back to back in alternating order. */
export async function countdownRatios(rounds) {
  const [stock, sliced] = await Promise.all([quickjs(SOURCE), quickjs(TARGET)]);
  const out = {};
  for (const [name, code] of Object.entries(WORKLOADS)) {
    time(stock, code); // warm-up: V8 tiers the wasm up
    time(sliced, code);
    const ratios = [];
    const stockMs = [];
    for (let i = 0; i < rounds; i++) {
      let a, b;
      if (i % 2 === 0) {
        a = time(stock, code);
        b = time(sliced, code);
      } else {
        b = time(sliced, code);
        a = time(stock, code);
      }
      stockMs.push(a);
      ratios.push(b / a);
    }
    out[name] = { ratios, stockMs };
  }
  return out;
}
