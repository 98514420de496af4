// The test binaries cargo built, from the JSON messages of
// `cargo test --no-run --message-format=json`, one per line:
// `<package folder>\t<executable>\t<package folder>/<target>`, in cargo's
// order. scripts/test runs them itself: every binary runs when another
// fails, its arguments go to libtest, and nothing holds cargo's build lock
// while tests run (`cargo test` does).
//
//   node scripts/test-binaries.mjs MESSAGES.json
import { readFileSync } from "node:fs";
import { dirname, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));

/** [{ dir, executable, id }] for each test binary cargo built, in cargo's order. */
export function testBinaries(messages) {
  const out = [];
  for (const line of messages.split("\n")) {
    if (!line.startsWith("{")) continue;
    const m = JSON.parse(line);
    if (m.reason !== "compiler-artifact" || !m.profile?.test || !m.executable) continue;
    const dir = dirname(m.manifest_path);
    const folder = relative(ROOT, dir) || ".";
    out.push({ dir, executable: m.executable, id: `${folder}/${m.target.name}` });
  }
  return out;
}

function main([file]) {
  if (!file) {
    console.error("usage: test-binaries.mjs MESSAGES.json");
    return 2;
  }
  const binaries = testBinaries(readFileSync(file, "utf8"));
  if (binaries.length === 0) {
    console.error(`error: ${file} names no test binary`);
    return 1;
  }
  for (const b of binaries) {
    console.log(`${b.dir}\t${b.executable}\t${b.id}`);
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(main(process.argv.slice(2)));
