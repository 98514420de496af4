// The sections of a wasm file and their sizes; with two files, whether they
// hold the same bytes in every section but the metadata ones (`name`,
// `producers`), which tools add or drop without changing the code. With
// --functions, its functions' code by size, named from the name section
// (a build that keeps names: BENCHMARKS.md, "Worker wasm size"); with
// --crates, those summed by the crate their name starts with (a rough
// split: generic code is named after the crate that defines it).
//
//   node scripts/wasm-sections.mjs A.wasm [B.wasm]
//   node scripts/wasm-sections.mjs --functions [N] A.wasm   (N: 40)
//   node scripts/wasm-sections.mjs --crates [N] A.wasm
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

/** How many functions the import section brings in (their indices come first). */
function importedFunctions(body) {
  if (!body) return 0;
  let [count, at] = leb(body, 0);
  let funcs = 0;
  const skip = () => { const [n, next] = leb(body, at); at = next + n; };
  const limits = () => { let flags; [flags, at] = leb(body, at); [, at] = leb(body, at); if (flags & 1) [, at] = leb(body, at); };
  for (let i = 0; i < count; i++) {
    skip(); // module
    skip(); // field
    const kind = body[at++];
    if (kind === 0) { [, at] = leb(body, at); funcs++; } // function: its type
    else if (kind === 1) { at++; limits(); } // table: reftype, limits
    else if (kind === 2) limits(); // memory
    else if (kind === 3) at += 2; // global: valtype, mutability
    else if (kind === 4) { at++; [, at] = leb(body, at); } // tag
    else throw new Error(`unknown import kind ${kind}`);
  }
  return funcs;
}

/** The name section's function names: index → name. */
function functionNames(body) {
  const names = new Map();
  if (!body) return names;
  let [len, at] = leb(body, 0);
  at += len; // the section's own name, "name"
  while (at < body.length) {
    const kind = body[at];
    const [size, start] = leb(body, at + 1);
    if (kind === 1) {
      let [count, p] = leb(body, start);
      for (let i = 0; i < count; i++) {
        let index, n;
        [index, p] = leb(body, p);
        [n, p] = leb(body, p);
        names.set(index, body.subarray(p, p + n).toString("utf8"));
        p += n;
      }
    }
    at = start + size;
  }
  return names;
}

/** The functions' code sizes, largest first: [{ index, name, size }]. */
export function functions(bytes) {
  const s = sections(bytes);
  const find = (label) => s.find((x) => x.label === label)?.bytes;
  const imported = importedFunctions(find("import"));
  const names = functionNames(find("name"));
  const code = find("code");
  const out = [];
  if (!code) return out;
  let [count, at] = leb(code, 0);
  for (let k = 0; k < count; k++) {
    const [size, start] = leb(code, at);
    const index = imported + k;
    out.push({ index, name: names.get(index) ?? `func[${index}]`, size });
    at = start + size;
  }
  return out.sort((x, y) => y.size - x.size || x.index - y.index);
}

/** The crate a (demangled) function name starts with. */
export function crateOf(name) {
  const m = /^(?:[<&]|dyn |mut )*([A-Za-z_][A-Za-z0-9_]*)/.exec(name);
  return m ? m[1] : "?";
}

/** Code bytes by crate, largest first: [[crate, bytes]]. */
export function byCrate(fns) {
  const sums = new Map();
  for (const f of fns) sums.set(crateOf(f.name), (sums.get(crateOf(f.name)) ?? 0) + f.size);
  return [...sums].sort((x, y) => y[1] - x[1]);
}

function main(args) {
  const mode = ["--functions", "--crates"].includes(args[0]) ? args.shift() : null;
  const top = mode && /^\d+$/.test(args[0] ?? "") ? Number(args.shift()) : 40;
  const [a, b] = args;
  if (!a || (mode && b)) {
    console.error("usage: wasm-sections.mjs A.wasm [B.wasm] | --functions [N] A.wasm | --crates [N] A.wasm");
    return 2;
  }
  if (mode) {
    const fns = functions(readFileSync(a));
    if (!fns.some((f) => !f.name.startsWith("func["))) console.log("(no name section: functions by index)");
    const rows = mode === "--crates" ? byCrate(fns) : fns.map((f) => [f.name, f.size]);
    for (const [name, size] of rows.slice(0, top)) console.log(`${String(size).padStart(9)}  ${name}`);
    return 0;
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
