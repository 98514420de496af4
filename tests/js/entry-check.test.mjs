// scripts/entry-check.mjs: the build stops when worker-build's entry, or the
// deploy config, asks for something our entry module (worker/entry.js) does
// not serve. Checked against worker-build 0.8.7's real template (the shim in
// the cargo registry, when present) and against our real files.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseToml } from "smol-toml";

import { LIBRARY_EXPORTS, checkConfig, checkShim, entryHandlers, namedExports } from "../../scripts/entry-check.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const ENTRY = readFileSync(path.join(ROOT, "worker/entry.js"), "utf8");

/** The tail of worker-build 0.8.7's shim.js with `handlers` in place of $HANDLERS. */
function shim(handlers, extra = "") {
  const methods = handlers
    .map((h) => `Entrypoint.prototype.${h} = function ${h} (arg) {\n  return exports.${h}.call(this, arg, this.env, this.ctx);\n}\n`)
    .join("");
  return `import { WorkerEntrypoint } from "cloudflare:workers";
import * as exports from "./index.js";
class Entrypoint extends WorkerEntrypoint {}

${methods}
const classProxyHooks = {};

export default new Proxy(Entrypoint, classProxyHooks);
${extra}`;
}

test("our entry serves fetch and nothing else", () => {
  assert.deepEqual(entryHandlers(ENTRY), ["fetch"]);
  assert.deepEqual(namedExports(ENTRY), []);
});

test("a shim with only fetch is served", () => {
  assert.deepEqual(checkShim(shim(["fetch"]), ENTRY), []);
});

test("a shim with a handler ours lacks stops the build, naming it", () => {
  for (const h of ["scheduled", "queue", "email", "tail"]) {
    const problems = checkShim(shim(["fetch", h]), ENTRY);
    assert.equal(problems.length, 1, problems.join("\n"));
    assert.match(problems[0], new RegExp(`handler \`${h}\``));
  }
});

test("a shim exporting a Durable Object class stops the build, naming it", () => {
  const problems = checkShim(
    shim(["fetch"], "export const Counter = new Proxy(exports.Counter, classProxyHooks);\n"),
    ENTRY,
  );
  assert.equal(problems.length, 1);
  assert.match(problems[0], /exports `Counter`/);
});

test("workers-rs' own exported structs are no entrypoint and may be dropped", () => {
  const library = LIBRARY_EXPORTS.map((n) => `export const ${n} = new Proxy(exports.${n}, classProxyHooks);\n`).join("");
  assert.deepEqual(checkShim(shim(["fetch"], library), ENTRY), []);
  const withClass = checkShim(shim(["fetch"], `${library}export const Counter = new Proxy(exports.Counter, classProxyHooks);\n`), ENTRY);
  assert.equal(withClass.length, 1);
  assert.match(withClass[0], /`Counter`/);
});

test("a shim that is not the template ours replaces stops the build", () => {
  const other = shim(["fetch"]).replace("export default new Proxy(Entrypoint, classProxyHooks);", "export default { fetch };");
  assert.match(checkShim(other, ENTRY).join("\n"), /not the one worker\/entry.js was written against/);
  const noFetch = checkShim(shim([]), ENTRY).join("\n");
  assert.match(noFetch, /no fetch handler/);
});

test("worker-build 0.8.7's own template, with fetch only, is served", (t) => {
  const registry = path.join(os.homedir(), ".cargo/registry/src");
  const dir = existsSync(registry)
    ? readdirSync(registry)
        .map((d) => path.join(registry, d, "worker-build-0.8.7/src/js/shim.js"))
        .find(existsSync)
    : undefined;
  if (!dir) return t.skip("worker-build 0.8.7's source is not in the cargo registry");
  const template = readFileSync(dir, "utf8");
  const fetchOnly = template.replace("$HANDLERS", shim(["fetch"]).match(/^Entrypoint[\s\S]*?^}\n/m)[0]);
  assert.deepEqual(checkShim(fetchOnly, ENTRY), []);
  const withCron = template.replace("$HANDLERS", "Entrypoint.prototype.scheduled = function scheduled (arg) {}\nEntrypoint.prototype.fetch = function fetch (arg) {}\n");
  assert.match(checkShim(withCron, ENTRY).join("\n"), /handler `scheduled`/);
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
