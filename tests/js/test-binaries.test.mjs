// scripts/test-binaries.mjs, which splits the test binaries between
// scripts/test's lanes: every binary cargo built lands in exactly one lane,
// the clock lane holds the ones named for it, and a new one goes to cpu.
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { CLOCK, laneOf, testBinaries } from "../../scripts/test-binaries.mjs";

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

test("the clock lane holds what it names; everything else, a new binary too, is cpu", () => {
  const lane = (folder, name, kind = "test") => laneOf(testBinaries(artifact(folder, name, kind))[0]);
  assert.equal(lane("tests/system", "rates"), "clock");
  assert.equal(lane("tests/system", "scheduler"), "clock");
  assert.equal(lane("tools", "chaos_smoke"), "clock");
  assert.equal(lane("tools", "queuegate_tools", "lib"), "clock");
  assert.equal(lane("tests/system", "drop_day"), "cpu");
  assert.equal(lane("tests/system", "a_new_topic"), "cpu");
  // A unit-test binary named like a clock target is not one.
  assert.equal(lane("tests/system", "scheduler", "bin"), "cpu");
  assert.ok(CLOCK.length > 0);
});
