// A V8 CPU profile of the worker under workerd, summarized by function.
//
//   QG_WORKERD_INSPECTOR_ADDR=127.0.0.1:9229 \
//     target/release-native/queuegate-edge-bench --routes position &
//   node --experimental-websocket bench/edge-profile.mjs 127.0.0.1:9229 8 [profile.cpuprofile]
//
// Attaches to the inspector, samples for the given seconds (start it while
// a measured window runs), prints self time per function (wasm functions
// are named only in a build that keeps the name section: build with
// `CARGO_PROFILE_RELEASE_STRIP=false scripts/build-worker`), and writes the
// raw profile for DevTools if a path is given.
import { writeFileSync } from "node:fs";

const [addr = "127.0.0.1:9229", seconds = "8", out] = process.argv.slice(2);
const targets = await (await fetch(`http://${addr}/json/list`)).json();
if (!targets.length) throw new Error(`no inspector target at ${addr}`);
const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
await new Promise((ok, fail) => { ws.onopen = ok; ws.onerror = fail; });
let id = 0;
const pending = new Map();
ws.onmessage = (m) => {
  const msg = JSON.parse(m.data);
  if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
};
const call = (method, params = {}) => new Promise((ok) => {
  const n = ++id;
  pending.set(n, ok);
  ws.send(JSON.stringify({ id: n, method, params }));
});
await call("Profiler.enable");
await call("Profiler.setSamplingInterval", { interval: 100 });
await call("Profiler.start");
await new Promise((r) => setTimeout(r, Number(seconds) * 1000));
const { result } = await call("Profiler.stop");
ws.close();
const profile = result.profile;
if (out) writeFileSync(out, JSON.stringify(profile));

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
let total = 0;
// timeDeltas[i] is the time from sample i-1 to sample i, so sample i
// stands for timeDeltas[i + 1], as DevTools counts it. Counted the other way
// the first sample after an idle gap took the whole gap: a profile of the
// exact poll read 52 % in `core::fmt::write`, 31 samples of 4,855.
profile.samples.forEach((nodeId, i) => {
  const dt = profile.timeDeltas[i + 1] || 0;
  const f = byId.get(nodeId).callFrame;
  const name = `${f.functionName || "(anonymous)"} ${f.url ? f.url.split("/").pop() : ""}`.trim();
  self.set(name, (self.get(name) || 0) + dt);
  total += dt;
});
const busy = total - (self.get("(idle)") || 0);
console.log(`sampled ${(total / 1e3).toFixed(0)} ms, busy ${(busy / 1e3).toFixed(0)} ms; self time of the top functions, % of busy:`);
[...self.entries()]
  .filter(([n]) => n !== "(idle)")
  .sort((a, b) => b[1] - a[1])
  .slice(0, 30)
  .forEach(([n, t]) => console.log(`${((100 * t) / busy).toFixed(1).padStart(5)} %  ${n}`));
