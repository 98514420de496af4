// scripts/entry-check.mjs: the build stops when the wasm (wasm-bindgen's
// module), or the deploy config, offers or asks for something our entry
// module (worker/entry.js) does not serve. Checked against modules in
// wasm-bindgen 0.2.130's `--target module` shape and against our real files;
// scripts/build-worker runs the same check on every real build.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseToml } from "smol-toml";

import {
  LIBRARY_EXPORTS,
  SYSTEM_FUNCTIONS,
  bindingClasses,
  bindingHandlers,
  checkBindings,
  checkConfig,
  deadExports,
  entryHandlers,
  namedExports,
} from "../../scripts/entry-check.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const ENTRY = readFileSync(path.join(ROOT, "worker/entry.js"), "utf8");

/**
 * A module in the shape wasm-bindgen 0.2.130 writes for `--target module`:
 * one `export function` per `#[wasm_bindgen]` function (the `#[event]`
 * handlers among them), the glue's own reset and init functions, one
 * `export class` per exported struct.
 */
function bindings(handlers, classes = []) {
  const fns = handlers
    .map((h) => `export function ${h}(req, env, ctx) {\n    const ret = wasm.${h}(req, env, ctx);\n    return ret;\n}\n`)
    .join("");
  const cls = classes.map((c) => `export class ${c} {\n    free() {}\n}\n`).join("");
  return `import source wasmModule from "./index_bg.wasm";
let wasm;
${cls}
export function __wbg_reset_state() {
    wasm = undefined;
}
${fns}
export function __worker_init_state() {
    return {};
}
`;
}

test("our entry serves fetch and nothing else", () => {
  assert.deepEqual(entryHandlers(ENTRY), ["fetch"]);
  assert.deepEqual(namedExports(ENTRY), []);
});

test("a wasm exporting only fetch is served; the glue's own functions are no handlers", () => {
  const mod = bindings(["fetch"]);
  assert.deepEqual(bindingHandlers(mod), ["fetch"]);
  for (const f of SYSTEM_FUNCTIONS) assert.match(mod, new RegExp(`export function ${f}\\(`));
  assert.deepEqual(checkBindings(mod, ENTRY), []);
  // `export { x as name }`, the other form worker-build reads, counts too.
  assert.deepEqual(bindingHandlers(`${mod}export { scheduled_impl as scheduled };\n`), ["fetch", "scheduled"]);
});

test("a wasm exporting a handler ours lacks stops the build, naming it", () => {
  for (const h of ["scheduled", "queue", "email", "tail"]) {
    const problems = checkBindings(bindings(["fetch", h]), ENTRY);
    assert.equal(problems.length, 1, problems.join("\n"));
    assert.match(problems[0], new RegExp(`handler \`${h}\``));
  }
  const async = checkBindings(`${bindings(["fetch"])}export async function queue(b, env, ctx) {}\n`, ENTRY);
  assert.match(async.join("\n"), /handler `queue`/);
});

test("a wasm exporting a Durable Object class stops the build, naming it", () => {
  const problems = checkBindings(bindings(["fetch"], ["Counter"]), ENTRY);
  assert.equal(problems.length, 1);
  assert.match(problems[0], /class `Counter`/);
});

test("workers-rs' own exported structs are no entrypoint and may be dropped", () => {
  assert.deepEqual(bindingClasses(bindings(["fetch"], LIBRARY_EXPORTS)), [...LIBRARY_EXPORTS].sort());
  assert.deepEqual(checkBindings(bindings(["fetch"], LIBRARY_EXPORTS), ENTRY), []);
  const withClass = checkBindings(bindings(["fetch"], [...LIBRARY_EXPORTS, "Counter"]), ENTRY);
  assert.equal(withClass.length, 1);
  assert.match(withClass[0], /`Counter`/);
});

test("a wasm without fetch, or an entry without its default object, stops the build", () => {
  assert.match(checkBindings(bindings([]), ENTRY).join("\n"), /exports no `fetch`/);
  assert.match(checkBindings(bindings(["fetch"]), "export const x = 1;\n").join("\n"), /no `export default/);
});

test("the command line stops a build on such a module, naming the reason", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "qg-entry-check-"));
  try {
    const mod = path.join(dir, "index.js");
    const run = () =>
      spawnSync(process.execPath, [path.join(ROOT, "scripts/entry-check.mjs"), "bindings", mod, path.join(ROOT, "worker/entry.js")], { encoding: "utf8" });
    writeFileSync(mod, bindings(["fetch", "scheduled"]));
    const refused = run();
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /handler `scheduled`/);
    writeFileSync(mod, bindings(["fetch"]));
    assert.equal(run().status, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the repo's wrangler.toml asks for nothing our entry lacks", () => {
  const config = parseToml(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"));
  assert.deepEqual(checkConfig(config, entryHandlers(ENTRY), namedExports(ENTRY)), []);
});

test("configs that need handlers or classes our entry lacks are refused, in any env", () => {
  const cases = [
    ["[triggers]\ncrons = [\"*/5 * * * *\"]\n", /crons needs a `scheduled` handler/],
    ["[[queues.consumers]]\nqueue = \"orders\"\n", /queues.consumers\]\] needs a `queue` handler/],
    ["[[durable_objects.bindings]]\nname = \"C\"\nclass_name = \"Counter\"\n", /class `Counter`/],
    ["[[workflows]]\nname = \"w\"\nbinding = \"W\"\nclass_name = \"Flow\"\n", /class `Flow`/],
    ["[[migrations]]\ntag = \"v1\"\nnew_classes = [\"Counter\"]\n", /migrations/],
    ["[env.production.triggers]\ncrons = [\"0 * * * *\"]\n", /\[env.production\] \[triggers\] crons/],
  ];
  for (const [toml, why] of cases) {
    const problems = checkConfig(parseToml(`name = "x"\n${toml}`), ["fetch"], []);
    assert.equal(problems.length, 1, `${toml}: ${problems.join("\n")}`);
    assert.match(problems[0], why);
  }
  // A Durable Object of another worker (script_name) needs nothing here.
  const other = parseToml('name = "x"\n[[durable_objects.bindings]]\nname = "C"\nclass_name = "Counter"\nscript_name = "other"\n');
  assert.deepEqual(checkConfig(other, ["fetch"], []), []);
  assert.deepEqual(checkConfig(parseToml('name = "x"\n[triggers]\ncrons = []\n'), ["fetch"], []), []);
});

test("the command line stops a build on such a config, naming the reason", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "qg-entry-check-"));
  try {
    const config = path.join(dir, "wrangler.toml");
    writeFileSync(config, 'name = "x"\nmain = "index.js"\n[triggers]\ncrons = ["* * * * *"]\n');
    const run = (file) =>
      spawnSync(process.execPath, [path.join(ROOT, "scripts/entry-check.mjs"), "config", file, path.join(ROOT, "worker/entry.js")], { encoding: "utf8" });
    const refused = run(config);
    assert.equal(refused.status, 1);
    assert.match(refused.stderr, /`scheduled` handler/);
    assert.equal(run(path.join(ROOT, "wrangler.toml")).status, 0);
    writeFileSync(config, "name = \n");
    const bad = run(config);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /wrangler.toml/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// Classes in the shape wasm-bindgen 0.2.130 writes them (tests/js: the real
// glue is checked by scripts/build-worker on every build): methods calling
// the wasm, a finalizer registered outside the class.
function glueClass(name, { exported = false, body = "" } = {}) {
  const lower = name.toLowerCase();
  return `${exported ? "export " : ""}class ${name} {
    __destroy_into_raw() {
        const ptr = this.__wbg_ptr;
        ${name}Finalization.unregister(this);
        return ptr;
    }
    free() {
        const ptr = this.__destroy_into_raw();
        wasm.__wbg_${lower}_free(ptr, 0);
    }
${body}}
const ${name}Finalization = (typeof FinalizationRegistry === 'undefined')
    ? { register: () => {}, unregister: () => {} }
    : new FinalizationRegistry(({ ptr, instance }) => {
    if (instance === __wbg_instance_id) wasm.__wbg_${lower}_free(ptr, 1);
});
`;
}

test("exports that only instance-less classes call are dead; wrapped or constructed classes and shared helpers stay", () => {
  const pull = "    pull(c) {\n        return wasm.source_pull(this.__wbg_ptr, c, wasm.__wbindgen_malloc, wasm.__wbindgen_free);\n    }\n";
  const mod = [
    glueClass("Source", { body: pull }),
    glueClass("R2Range", { exported: true, body: "    get length() {\n        return wasm.__wbg_get_r2range_length(this.__wbg_ptr);\n    }\n" }),
    // Handed to JS by the wasm: live.
    glueClass("Handle", { body: "    get id() {\n        return wasm.handle_id(this.__wbg_ptr);\n    }\n    static __wrap(ptr) {\n        return Object.create(Handle.prototype);\n    }\n" }),
    // JS may construct it: live.
    glueClass("Counter", { exported: true, body: "    constructor() {\n        this.__wbg_ptr = wasm.counter_new();\n    }\n" }),
    "export function __wbg_new_1(arg0) {\n    return Handle.__wrap(arg0);\n}\n",
    "function passString(arg) {\n    return wasm.__wbindgen_malloc(arg.length, 1);\n}\n",
    "export function fetch(req) {\n    return wasm.fetch(req);\n}\n",
  ].join("");
  assert.deepEqual(deadExports(mod), [
    "__wbg_get_r2range_length", "__wbg_r2range_free", "__wbg_source_free", "__wbindgen_free", "source_pull",
  ]);
  assert.deepEqual(deadExports(bindings(["fetch"])), []);
});

test("the command line prints the dead exports, comma-separated", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "qg-entry-check-"));
  try {
    const file = path.join(dir, "index.js");
    writeFileSync(file, glueClass("Source") + glueClass("Sink"));
    const r = spawnSync(process.execPath, [path.join(ROOT, "scripts/entry-check.mjs"), "dead-exports", file], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, "__wbg_sink_free,__wbg_source_free\n");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
