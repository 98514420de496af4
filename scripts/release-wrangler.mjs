// Writes the release archive's wrangler.toml from the repo's: the same
// worker, vars and assets binding, pointed at the built bundle beside it
// (worker/index.js, worker/assets) and without the [build] table, whose
// command needs the Rust toolchain. The result is parsed back to check it.
//
//   node scripts/release-wrangler.mjs <repo wrangler.toml> <out>
import { readFileSync, writeFileSync } from "node:fs";
import { parse } from "smol-toml";

const [from, to] = process.argv.slice(2);
if (!from || !to) {
  console.error("usage: release-wrangler.mjs <wrangler.toml> <out>");
  process.exit(2);
}
const lines = readFileSync(from, "utf8").split("\n");
const out = [];
let inBuild = false;
for (const line of lines) {
  if (/^\[build\]\s*$/.test(line)) { inBuild = true; continue; }
  // The [build] table ends at the next table or a blank line after it.
  if (inBuild && (/^\[/.test(line) || line.trim() === "")) inBuild = false;
  if (inBuild) continue;
  out.push(line
    .replace(/^main = "worker\/build\/index\.js"/, 'main = "worker/index.js"')
    .replace(/^directory = "worker\/build\/assets"/, 'directory = "worker/assets"'));
}
let text = out.join("\n")
  .replace(/^# queuegate edge worker\..*\n# .*\n/m,
    "# queuegate edge worker, as released: `npx wrangler deploy` uploads the\n"
    + "# built bundle in worker/ as it is (no build step, no Rust).\n");
const doc = parse(text);
if (doc.build) throw new Error("a [build] table is left");
if (doc.main !== "worker/index.js") throw new Error(`main is ${doc.main}`);
if (doc.assets?.directory !== "worker/assets") throw new Error("assets.directory not rewritten");
writeFileSync(to, text);
