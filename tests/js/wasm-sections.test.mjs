// scripts/wasm-sections.mjs, which BENCHMARKS.md uses to compare two builds
// of the worker's wasm: sections read in order, custom ones by their name,
// and two modules equal but for `name`/`producers` told from two that differ;
// and the functions by size, named after the imports, and summed by crate.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { byCrate, crateOf, functions, sections } from "../../scripts/wasm-sections.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
const custom = (name, body) => [0, name.length + 1 + body.length, name.length, ...Buffer.from(name), ...body];
// A type section with one `() -> ()` function type.
const TYPES = [1, 4, 1, 0x60, 0, 0];

function module(...parts) {
  return Buffer.from([...HEADER, ...parts.flat()]);
}

test("sections come in file order, custom ones by name", () => {
  const s = sections(module(TYPES, custom("name", [1, 2, 3]), custom("producers", [9])));
  assert.deepEqual(s.map((x) => [x.label, x.bytes.length]), [["type", 4], ["name", 8], ["producers", 11]]);
  assert.throws(() => sections(Buffer.from("not wasm")), /not a wasm module/);
});

test("two modules are the same but for metadata, or not", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "qg-wasm-sections-"));
  try {
    const write = (name, bytes) => { const f = path.join(dir, name); writeFileSync(f, bytes); return f; };
    const a = write("a.wasm", module(TYPES, custom("name", [1]), custom("producers", [1])));
    const b = write("b.wasm", module(TYPES, custom("producers", [2, 2])));
    const c = write("c.wasm", module([1, 5, 1, 0x60, 1, 0x7f, 0]));
    const run = (...files) => spawnSync(process.execPath, [path.join(ROOT, "scripts/wasm-sections.mjs"), ...files], { encoding: "utf8" });
    const same = run(a, b);
    assert.equal(same.status, 0, same.stdout + same.stderr);
    assert.match(same.stdout, /the same bytes in every section but name and producers/);
    const differ = run(a, c);
    assert.equal(differ.status, 1);
    assert.match(differ.stdout, /the sections differ/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// One imported function (index 0), then two of ours (1 and 2) with bodies of
// 2 and 4 bytes, named in the name section; a memory import, which is no
// function, before them.
const bytesOf = (text) => [text.length, ...Buffer.from(text)];
const section = (id, body) => [id, body.length, ...body];
const IMPORTS = section(2, [2, ...bytesOf("m"), ...bytesOf("mem"), 2, 0, 1, ...bytesOf("m"), ...bytesOf("f"), 0, 0]);
const FUNCS = section(3, [2, 0, 0]);
const CODE = section(10, [2, 2, 0, 0x0b, 4, 0, 0x01, 0x01, 0x0b]);
const NAMES = (() => {
  const names = [2, 1, ...bytesOf("core[0a1b]::fmt::write"), 2, ...bytesOf("<queuegate_worker::App>::poll")];
  const body = [...bytesOf("name"), 1, names.length, ...names];
  return section(0, body);
})();

test("functions come largest first, named by their index after the imports", () => {
  const fns = functions(module(TYPES, IMPORTS, FUNCS, CODE, NAMES));
  assert.deepEqual(fns, [
    { index: 2, name: "<queuegate_worker::App>::poll", size: 4 },
    { index: 1, name: "core[0a1b]::fmt::write", size: 2 },
  ]);
  assert.deepEqual(byCrate(fns), [["queuegate_worker", 4], ["core", 2]]);
  assert.equal(crateOf("<&dyn core::any::Any as core::fmt::Debug>::fmt"), "core");
  // Without a name section, by index.
  assert.deepEqual(functions(module(TYPES, IMPORTS, FUNCS, CODE)).map((f) => f.name), ["func[2]", "func[1]"]);
});

test("the command line lists functions and crates, and refuses two files there", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "qg-wasm-sections-"));
  try {
    const f = path.join(dir, "named.wasm");
    writeFileSync(f, module(TYPES, IMPORTS, FUNCS, CODE, NAMES));
    const run = (...args) => spawnSync(process.execPath, [path.join(ROOT, "scripts/wasm-sections.mjs"), ...args], { encoding: "utf8" });
    const top = run("--functions", "1", f);
    assert.equal(top.status, 0, top.stderr);
    assert.equal(top.stdout, "        4  <queuegate_worker::App>::poll\n");
    const crates = run("--crates", f);
    assert.equal(crates.stdout, "        4  queuegate_worker\n        2  core\n");
    const two = run("--functions", f, f);
    assert.equal(two.status, 2);
    assert.match(two.stderr, /usage/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
