// The worker's entry module: the runtime calls `fetch` on its default
// export, which hands the request to the Rust worker (wasm-bindgen's
// `fetch`, the `#[event(fetch)]` function in worker/src/lib.rs).
//
// It takes the place of worker-build's own entry (scripts/esbuild-entry
// swaps it in when worker-build bundles; docs/edge.md, "The entry"). That
// one exports a `WorkerEntrypoint` class behind a `Proxy` and, per request,
// constructs the class, wraps the instance in another `Proxy` and `fetch`
// in a third, so that class instances can be rebuilt after the wasm is
// reset. This worker has no classes (no Durable Objects, no RPC), and that
// machinery was ~8 % of the CPU of a poll (BENCHMARKS.md, "The worker
// under workerd").
//
// Recovery after a Rust panic does not depend on it: workers-rs' abort hook
// schedules a re-initialisation and wasm-bindgen's glue (built with
// `--force-enable-abort-handler` and `--experimental-reset-state-function`
// by worker-build) instantiates a fresh module on the next call, which is
// this `fetch` (tests/system/tests/edge/probes.rs).
import * as wasm from "./index.js";

export default {
  fetch(request, env, ctx) {
    return wasm.fetch(request, env, ctx);
  },
};
