// scripts/wasm-sections.mjs, which BENCHMARKS.md uses to compare two builds
// of the worker's wasm: sections read in order, custom ones by their name,
// and two modules equal but for `name`/`producers` told from two that differ.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { sections } from "../../scripts/wasm-sections.mjs";

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
