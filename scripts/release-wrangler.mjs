// Writes the release archive's wrangler.toml from the repo's: the same
// worker, vars and assets binding, without the [build] table, whose
// command needs the Rust toolchain. The archive lays the bundle out where
// the repo builds it (worker/build), so nothing else changes: every other
// line is copied as it is, comments included. The result is parsed back
// and compared with the repo's, less [build], to check it.
//
//   node scripts/release-wrangler.mjs <repo wrangler.toml> <out>
import { readFileSync, writeFileSync } from "node:fs";
import { isDeepStrictEqual } from "node:util";
import { parse } from "smol-toml";

const [from, to] = process.argv.slice(2);
if (!from || !to) {
  console.error("usage: release-wrangler.mjs <wrangler.toml> <out>");
  process.exit(2);
}
const source = readFileSync(from, "utf8");
const out = [];
let inBuild = false;
// [build] runs to the next table or the first blank line after it (the
// comments above the next table are that table's); the check below
// proves nothing else was dropped.
for (const line of source.split("\n")) {
  if (line.trim() === "[build]") inBuild = true;
  else if (inBuild && (line.trim() === "" || line.trim().startsWith("["))) inBuild = false;
  if (!inBuild) out.push(line);
}
const text = out.join("\n");
const expected = parse(source);
delete expected.build;
const written = parse(text);
if (!isDeepStrictEqual(written, expected)) {
  throw new Error("the archive's wrangler.toml differs from the repo's beyond [build]");
}
writeFileSync(to, text);
