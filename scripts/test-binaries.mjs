// The test binaries of one lane of scripts/test, from the JSON messages of
// `cargo test --no-run --message-format=json`, one per line:
// `<package folder>\t<executable>\t<package>/<target>`.
//
//   node scripts/test-binaries.mjs MESSAGES.json clock|cpu
//
// scripts/test runs its lanes side by side. `clock` holds the binaries
// that mostly wait on the clock (admission rates, leases, a drop's faults,
// crowds that back off): on the 2-core build machine they kept a core
// busy 10-36 % of their time. `cpu` holds every other binary, so a new
// test binary is run even when nobody assigns it.
import { readFileSync } from "node:fs";
import { dirname, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/** `<package folder>/<test target>` of the clock lane; a folder alone: all its binaries. */
export const CLOCK = ["tests/system/rates", "tests/system/scheduler", "tests/system/engine", "tools"];

/** [{ dir, executable, id }] for each test binary cargo built, in cargo's order. */
export function testBinaries(messages) {
  const out = [];
  for (const line of messages.split("\n")) {
    if (!line.startsWith("{")) continue;
    const m = JSON.parse(line);
    if (m.reason !== "compiler-artifact" || !m.profile?.test || !m.executable) continue;
    const dir = dirname(m.manifest_path);
    const folder = relative(ROOT, dir) || ".";
    out.push({ dir, executable: m.executable, id: `${folder}/${m.target.name}`, folder, kind: m.target.kind });
  }
  return out;
}

/** The lane a binary runs in. */
export function laneOf(binary) {
  const clock = CLOCK.some((c) =>
    c === binary.folder || (binary.kind.includes("test") && c === `${binary.folder}/${binary.id.split("/").pop()}`));
  return clock ? "clock" : "cpu";
}

function main([file, lane]) {
  if (!file || !["clock", "cpu"].includes(lane)) {
    console.error("usage: test-binaries.mjs MESSAGES.json clock|cpu");
    return 2;
  }
  const binaries = testBinaries(readFileSync(file, "utf8"));
  if (binaries.length === 0) {
    console.error(`error: ${file} names no test binary`);
    return 1;
  }
  for (const b of binaries.filter((b) => laneOf(b) === lane)) {
    console.log(`${b.dir}\t${b.executable}\t${b.id}`);
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(main(process.argv.slice(2)));
