// scripts/test-binaries.mjs, which lists the test binaries scripts/test
// runs: every test binary cargo built, none of its other builds, and the
// command line refuses messages that name none.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";

import { testBinaries } from "../../scripts/test-binaries.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

function artifact(folder, name, kind, test = true, executable = `/t/debug/deps/${name}-0`) {
  return JSON.stringify({
    reason: "compiler-artifact",
    manifest_path: path.join(ROOT, folder, "Cargo.toml"),
    target: { name, kind: [kind] },
    profile: { test },
    executable,
  });
}

test("cargo's messages become binaries; builds that are no test binary are left out", () => {
  const messages = [
    artifact("tests/system", "rates", "test"),
    artifact("shared", "queuegate_shared", "lib"),
    artifact("shared", "queuegate_shared", "lib", false, null),
    JSON.stringify({ reason: "build-finished", success: true }),
    "   Compiling something (not JSON)",
  ].join("\n");
  const got = testBinaries(messages);
  assert.deepEqual(got.map((b) => b.id), ["tests/system/rates", "shared/queuegate_shared"]);
  assert.equal(got[0].dir, path.join(ROOT, "tests/system"));
});

test("the command line prints folder, executable and id; messages without a test binary are an error", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "qg-test-binaries-"));
  try {
    const file = path.join(dir, "messages.json");
    const run = () => spawnSync(process.execPath, [path.join(ROOT, "scripts/test-binaries.mjs"), file], { encoding: "utf8" });
    writeFileSync(file, `${artifact("tests/system", "rates", "test")}\n`);
    const ok = run();
    assert.equal(ok.status, 0, ok.stderr);
    assert.equal(ok.stdout, `${path.join(ROOT, "tests/system")}\t/t/debug/deps/rates-0\ttests/system/rates\n`);
    writeFileSync(file, JSON.stringify({ reason: "build-finished", success: true }));
    const none = run();
    assert.equal(none.status, 1);
    assert.match(none.stderr, /names no test binary/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
