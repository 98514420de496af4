// Guards our entry module (worker/entry.js), which takes the place of the
// one worker-build generates (docs/edge.md, "The entry"): the build stops,
// naming the reason, wherever ours would silently drop something the wasm
// offers or the deploy config asks for.
//
//   node scripts/entry-check.mjs bindings INDEX.js ENTRY.js
//     wasm-bindgen's module (what the wasm exports) against our entry: each
//     exported function is a handler worker-build's entry would serve
//     (fetch, scheduled, queue, email, …), each exported class a named
//     export (a Durable Object or Workflow class).
//   node scripts/entry-check.mjs config WRANGLER.toml ENTRY.js
//     the deploy config asks for nothing our entry does not serve: cron
//     triggers, queue consumers, Durable Objects or Workflows of this
//     worker, in the top level or any [env.*].
//   node scripts/entry-check.mjs dead-exports INDEX.js
//     the wasm's exports that only classes no JS object can be an instance
//     of call, comma-separated (scripts/build-worker removes them before
//     wasm-opt; see `deadExports`).
//
// Exit 0 when all is served; 1 with one line per problem otherwise.
import { readFileSync } from "node:fs";
import { parse as parseToml } from "smol-toml";

/**
 * Named exports worker-build's entry would re-export that are no entrypoint:
 * `#[wasm_bindgen]` structs of workers-rs itself (worker 0.8.7:
 * container.rs, request_init.rs), wrapped like any exported class. Our
 * entry drops them on purpose. Review this list with every workers-rs
 * upgrade (docs/edge.md, "The entry").
 */
export const LIBRARY_EXPORTS = ["ContainerStartupOptions", "MinifyConfig", "R2Range"];

/**
 * Functions of wasm-bindgen's module that are the glue's own, not handlers
 * (worker-build 0.8.7's `SYSTEM_FNS`).
 */
export const SYSTEM_FUNCTIONS = ["__wbg_reset_state", "__worker_init_state"];

/**
 * The handlers worker-build's entry would serve for wasm-bindgen's module:
 * each exported function but the glue's own (its `generate_handlers`).
 */
export function bindingHandlers(bindings) {
  const names = [];
  for (const m of bindings.matchAll(/^export\s+(?:async\s+)?function\s+([A-Za-z_$][\w$]*)\s*\(/gm)) names.push(m[1]);
  for (const m of bindings.matchAll(/^export\s*\{([^}]*)\}/gm)) {
    for (const part of m[1].split(",")) {
      const name = part.trim().split(/\s+as\s+/).pop().trim();
      if (name && name !== "default") names.push(name);
    }
  }
  return names.filter((n) => !SYSTEM_FUNCTIONS.includes(n)).sort();
}

/**
 * The wasm exports that only dead classes call. wasm-bindgen exports every
 * `#[wasm_bindgen]` struct in the dependency graph, used or not: workers-rs'
 * own (LIBRARY_EXPORTS) and wasm-streams' stream adapters (`IntoUnderlying…`,
 * behind workers-rs' Rust-stream bodies, which the worker never builds).
 * A class of the glue that has no constructor and is never wrapped
 * (`Name.__wrap(`, how the glue turns a pointer from the wasm into an
 * instance) can have no instance, so nothing can call its methods or its
 * finalizer, and their exports keep only code nothing runs. An export the
 * glue also calls elsewhere is kept.
 */
export function deadExports(bindings) {
  const calls = (text) => new Set([...text.matchAll(/\bwasm\.([A-Za-z_$][\w$]*)/g)].map((m) => m[1]));
  let rest = bindings;
  const dead = new Set();
  for (const m of bindings.matchAll(/^(?:export\s+)?class\s+([A-Za-z_$][\w$]*)\s*\{[\s\S]*?^\}$/gm)) {
    const [text, name] = m;
    if (bindings.includes(`${name}.__wrap(`) || /^\s+constructor\s*\(/m.test(text)) continue;
    const finalizer = bindings.match(new RegExp(`^const ${name}Finalization = [\\s\\S]*?^\\}\\);$`, "m"));
    for (const part of [text, finalizer?.[0] ?? ""]) {
      for (const e of calls(part)) dead.add(e);
      rest = rest.replace(part, "");
    }
  }
  const live = calls(rest);
  return [...dead].filter((e) => !live.has(e)).sort();
}

/** The classes wasm-bindgen's module exports (`export class Name`). */
export function bindingClasses(bindings) {
  return [...bindings.matchAll(/^export\s+class\s+([A-Za-z_$][\w$]*)/gm)].map((m) => m[1]).sort();
}

/** Names a module exports besides its default export. */
export function namedExports(source) {
  const names = [];
  const decl = /^export\s+(?:const|let|var|function\*?|async\s+function|class)\s+([A-Za-z_$][\w$]*)/gm;
  for (const m of source.matchAll(decl)) names.push(m[1]);
  for (const m of source.matchAll(/^export\s*\{([^}]*)\}/gm)) {
    for (const part of m[1].split(",")) {
      const name = part.trim().split(/\s+as\s+/).pop().trim();
      if (name && name !== "default") names.push(name);
    }
  }
  if (/^export\s+\*/m.test(source)) names.push("* (a re-export of a whole module)");
  return names.sort();
}

/** Handlers our entry's default export object defines (`name(…) {`). */
export function entryHandlers(entry) {
  const body = entry.match(/^export default \{([\s\S]*?)^\};/m);
  if (!body) return null;
  return [...body[1].matchAll(/^ {2}(?:async\s+)?([A-Za-z_$][\w$]*)\s*\(/gm)]
    .map((m) => m[1])
    .sort();
}

/** Why the wasm (wasm-bindgen's module) offers what `entry` does not serve (empty: nothing). */
export function checkBindings(bindings, entry) {
  const ours = entryHandlers(entry);
  if (ours === null) return ["worker/entry.js has no `export default { … };` object"];
  const problems = [];
  const theirs = bindingHandlers(bindings);
  if (!theirs.includes("fetch")) problems.push("the wasm exports no `fetch` (no `#[event(fetch)]`?)");
  for (const h of theirs.filter((h) => !ours.includes(h))) {
    problems.push(`the wasm exports the handler \`${h}\`, which worker/entry.js does not serve`);
  }
  for (const h of ours.filter((h) => !theirs.includes(h))) {
    problems.push(`worker/entry.js serves \`${h}\`, which the wasm does not export`);
  }
  const ourNamed = namedExports(entry);
  const dropped = bindingClasses(bindings).filter((n) => !ourNamed.includes(n) && !LIBRARY_EXPORTS.includes(n));
  for (const n of dropped) {
    problems.push(`the wasm exports the class \`${n}\` (a Durable Object or Workflow?), which worker/entry.js does not export`);
  }
  return problems;
}

/** Why `config` (parsed wrangler.toml) asks for what `handlers` lack. */
export function checkConfig(config, handlers, named = []) {
  const problems = [];
  const scopes = [["", config]];
  for (const [name, env] of Object.entries(config.env ?? {})) scopes.push([`[env.${name}] `, env]);
  const own = (b) => b && b.class_name && !b.script_name;
  for (const [where, c] of scopes) {
    const need = (handler, what) => {
      if (!handlers.includes(handler)) {
        problems.push(`${where}${what} needs a \`${handler}\` handler, which worker/entry.js does not serve`);
      }
    };
    if ((c.triggers?.crons ?? []).length > 0) need("scheduled", "[triggers] crons");
    if ((c.queues?.consumers ?? []).length > 0) need("queue", "[[queues.consumers]]");
    const classes = [
      ...(c.durable_objects?.bindings ?? []).filter(own).map((b) => ["[[durable_objects.bindings]]", b.class_name]),
      ...(c.workflows ?? []).filter(own).map((b) => ["[[workflows]]", b.class_name]),
    ];
    for (const [what, cls] of classes) {
      if (!named.includes(cls)) {
        problems.push(`${where}${what} names the class \`${cls}\` of this worker, which worker/entry.js does not export`);
      }
    }
    if ((c.migrations ?? []).length > 0 && classes.length === 0 && named.length === 0) {
      problems.push(`${where}[[migrations]] declares Durable Object classes, which worker/entry.js does not export`);
    }
  }
  return problems;
}

function main(argv) {
  const [what, file, entryPath] = argv;
  if (what === "dead-exports" && file && !entryPath) {
    console.log(deadExports(readFileSync(file, "utf8")).join(","));
    return 0;
  }
  if (!["bindings", "config"].includes(what) || !file || !entryPath) {
    console.error("usage: entry-check.mjs bindings INDEX.js ENTRY.js | config WRANGLER.toml ENTRY.js | dead-exports INDEX.js");
    return 2;
  }
  const entry = readFileSync(entryPath, "utf8");
  let problems;
  if (what === "bindings") {
    problems = checkBindings(readFileSync(file, "utf8"), entry);
  } else {
    let config;
    try {
      config = parseToml(readFileSync(file, "utf8"));
    } catch (e) {
      console.error(`error: ${file}: ${e.message}`);
      return 1;
    }
    problems = checkConfig(config, entryHandlers(entry) ?? [], namedExports(entry));
  }
  for (const p of problems) console.error(`error: ${p}; see docs/edge.md, "The entry"`);
  return problems.length === 0 ? 0 : 1;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exit(main(process.argv.slice(2)));
