// The sections of a wasm file and their sizes; with two files, whether they
// hold the same bytes in every section but the metadata ones (`name`,
// `producers`), which tools add or drop without changing the code.
//
//   node scripts/wasm-sections.mjs A.wasm [B.wasm]
//
// Exit 0; with two files, 1 when a section other than those differs.
import { readFileSync } from "node:fs";

const KINDS = ["custom", "type", "import", "function", "table", "memory", "global",
  "export", "start", "element", "code", "data", "data count", "tag"];
const METADATA = ["name", "producers"];

function leb(bytes, at) {
  let value = 0, shift = 0, byte;
  do {
    byte = bytes[at++];
    value += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return [value, at];
}

/** [{ label, bytes }] in file order; a custom section is labelled by its name. */
export function sections(bytes) {
  if (bytes.readUInt32BE(0) !== 0x0061736d) throw new Error("not a wasm module");
  const out = [];
  let at = 8;
  while (at < bytes.length) {
    const id = bytes[at];
    const [size, start] = leb(bytes, at + 1);
    const body = bytes.subarray(start, start + size);
    let label = KINDS[id] ?? `section ${id}`;
    if (id === 0) {
      const [len, name] = leb(body, 0);
      label = body.subarray(name, name + len).toString("utf8");
    }
    out.push({ label, bytes: body });
    at = start + size;
  }
  return out;
}

function main([a, b]) {
  if (!a) {
    console.error("usage: wasm-sections.mjs A.wasm [B.wasm]");
    return 2;
  }
  const files = [a, b].filter(Boolean).map((f) => ({ f, s: sections(readFileSync(f)) }));
  for (const { f, s } of files) {
    console.log(`${f}: ${s.map((x) => `${x.label} ${x.bytes.length}`).join(", ")}`);
  }
  if (files.length < 2) return 0;
  const code = (s) => s.filter((x) => !METADATA.includes(x.label));
  const [x, y] = files.map(({ s }) => code(s));
  const same = x.length === y.length && x.every((sec, i) => sec.label === y[i].label && sec.bytes.equals(y[i].bytes));
  console.log(same
    ? `the same bytes in every section but ${METADATA.join(" and ")}`
    : "the sections differ (besides name and producers)");
  return same ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(main(process.argv.slice(2)));
