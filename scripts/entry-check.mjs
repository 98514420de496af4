// Guards our entry module (worker/entry.js), which replaces worker-build's
// generated one (docs/edge.md, "The entry"): the build stops, naming the
// reason, wherever ours would silently drop something worker-build's serves.
//
//   node scripts/entry-check.mjs shim SHIM.js ENTRY.js
//     worker-build's entry against ours: the same handlers on the default
//     export (fetch, scheduled, queue, email, …) and the same named exports
//     (Durable Object or Workflow classes).
//   node scripts/entry-check.mjs config WRANGLER.toml ENTRY.js
//     the deploy config asks for nothing our entry does not serve: cron
//     triggers, queue consumers, Durable Objects or Workflows of this
//     worker, in the top level or any [env.*].
//
// Exit 0 when all is served; 1 with one line per problem otherwise.
import { readFileSync } from "node:fs";
import { parse as parseToml } from "smol-toml";

/**
 * Named exports worker-build's entry re-exports that are no entrypoint:
 * `#[wasm_bindgen]` structs of workers-rs itself (worker 0.8.7:
 * container.rs, request_init.rs), wrapped like any exported class. Our
 * entry drops them on purpose. Review this list with every workers-rs
 * upgrade (docs/edge.md, "The entry").
 */
export const LIBRARY_EXPORTS = ["ContainerStartupOptions", "MinifyConfig", "R2Range"];

/** Handlers worker-build's entry puts on its default export. */
export function shimHandlers(shim) {
  return [...shim.matchAll(/^Entrypoint\.prototype\.([A-Za-z_$][\w$]*)\s*=/gm)]
    .map((m) => m[1])
    .sort();
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

/** Why `shim` serves what `entry` does not (empty: nothing). */
export function checkShim(shim, entry) {
  const problems = [];
  if (!/^export default new Proxy\(Entrypoint, classProxyHooks\);?$/m.test(shim)) {
    problems.push(
      "worker-build's entry is not the one worker/entry.js was written against " +
        "(no `export default new Proxy(Entrypoint, classProxyHooks)`)",
    );
  }
  const ours = entryHandlers(entry);
  if (ours === null) {
    return [...problems, "worker/entry.js has no `export default { … };` object"];
  }
  const theirs = shimHandlers(shim);
  if (!theirs.includes("fetch")) problems.push("worker-build's entry has no fetch handler to replace");
  for (const h of theirs.filter((h) => !ours.includes(h))) {
    problems.push(`worker-build's entry serves the handler \`${h}\`, which worker/entry.js does not`);
  }
  for (const h of ours.filter((h) => !theirs.includes(h))) {
    problems.push(`worker/entry.js serves \`${h}\`, which the wasm does not export`);
  }
  const ourNamed = namedExports(entry);
  const dropped = namedExports(shim).filter((n) => !ourNamed.includes(n) && !LIBRARY_EXPORTS.includes(n));
  for (const n of dropped) {
    problems.push(`worker-build's entry exports \`${n}\` (a Durable Object or Workflow class?), which worker/entry.js does not`);
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
  if (!["shim", "config"].includes(what) || !file || !entryPath) {
    console.error("usage: entry-check.mjs shim SHIM.js ENTRY.js | config WRANGLER.toml ENTRY.js");
    return 2;
  }
  const entry = readFileSync(entryPath, "utf8");
  let problems;
  if (what === "shim") {
    problems = checkShim(readFileSync(file, "utf8"), entry);
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
