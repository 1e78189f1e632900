// The sandbox's QuickJS (plugins/js/quickjs-sliced.wasm) is exactly what
// scripts/slice-quickjs.mjs makes of the installed quickjs-emscripten wasm, and
// every loop in it, a built-in's as much as the interpreter's, counts down to
// the host's tick.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { newQuickJSWASMModuleFromVariant, newVariant } from "quickjs-emscripten-core";
import releaseSyncVariant from "@jitl/quickjs-wasmfile-release-sync";
import { IMPORT_MODULE, SOURCE, TARGET, sliceQuickJS } from "../../scripts/slice-quickjs.mjs";

test("the committed wasm is the sliced build of the installed QuickJS (node scripts/slice-quickjs.mjs remakes it)", () => {
  const { bytes, loops } = sliceQuickJS(readFileSync(SOURCE));
  assert.ok(loops > 500, `${loops} loops instrumented`);
  assert.ok(Buffer.from(bytes).equals(readFileSync(TARGET)), `${TARGET} differs: run node scripts/slice-quickjs.mjs`);
  const imports = WebAssembly.Module.imports(new WebAssembly.Module(bytes)).filter((i) => i.module === IMPORT_MODULE);
  assert.deepEqual(imports, [
    { module: IMPORT_MODULE, name: "tick", kind: "function" },
    { module: IMPORT_MODULE, name: "pause", kind: "function" },
  ]);
});

test("one long built-in call ticks all along: a BigInt's toString", async () => {
  const sliced = new WebAssembly.Module(readFileSync(TARGET));
  let ticks = 0;
  const variant = newVariant(releaseSyncVariant, {
    emscriptenModule: {
      instantiateWasm(imports, onSuccess) {
        const instance = new WebAssembly.Instance(sliced, { ...imports, [IMPORT_MODULE]: { tick: () => (ticks++, 1_000), pause: () => 1_000 } });
        onSuccess(instance);
        return instance.exports;
      },
    },
  });
  const vm = (await newQuickJSWASMModuleFromVariant(variant)).newContext();
  const big = vm.unwrapResult(vm.evalCode("10n ** 20000n"));
  const digits = vm.unwrapResult(vm.evalCode("(n) => n.toString().length"));
  const before = ticks;
  const length = vm.unwrapResult(vm.callFunction(digits, vm.undefined, big));
  // One call, a handful of bytecodes; its digits cost many thousands of loop iterations.
  const during = ticks - before;
  assert.equal(vm.getNumber(length), 20001);
  assert.ok(during > 20, `${during} ticks`);
  for (const handle of [length, digits, big, vm]) handle.dispose();
});
