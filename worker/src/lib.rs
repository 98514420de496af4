//! queuegate's edge worker: thin I/O around `queuegate-shared` and the pure
//! protocol in `queuegate-edge` (cookies, identity, origin signing, URLs).
//!
//! * [`routes`] — the route table: what answers a path, and its `Allow`.
//! * [`app`] — the own routes, one module each (enter, position, the
//!   page, …), and the token gate in front of the protected ones.
//! * [`visitor`] — who sent a request (visitor cookie or JWT); [`verified`]
//!   the JWTs and cookies an isolate verified, so its polls are not
//!   verified again.
//! * [`guard`] — what a new place brings: ALTCHA solution, Turnstile, address.
//! * [`origin`] — forwarding: scrubbing our headers and cookies, signing.
//! * [`rest`] — the Upstash REST client over the runtime's `fetch`.
//! * [`assets`] — the page's and the scripts' files beside the wasm.
//! * [`subrequest`] — other text subrequests (JWKS, siteverify).
//! * [`health`] — `GET /queue/health`, one Redis check a second per isolate.
//! * [`page`] — the waiting-room page; [`i18n`] its languages and texts.
//! * [`random`] — every random byte the worker uses.
//! * [`clock`] — the time, `Date.now()` in one call.
//! * [`config`] / [`error`] / [`http`] — vars and secrets (page settings
//!   included), the one error enum and its mapping to replies, reply helpers.
//! * [`exec`] — runs the request's future (the entry is `worker/entry.js`,
//!   which calls [`fetch`]).
//!
//! Every queue operation is one Redis REST call; all queue logic lives in
//! the shared crate so the worker and the scheduler cannot disagree.

pub mod app;
pub mod assets;
pub mod clock;
pub mod config;
pub mod error;
pub mod exec;
pub mod guard;
pub mod health;
pub mod http;
pub mod i18n;
pub mod jwks;
pub mod origin;
pub mod page;
pub mod random;
pub mod rest;
pub mod routes;
pub mod snapshots;
pub mod subrequest;
pub mod template;
pub mod terms;
pub mod verified;
pub mod visitor;

use std::sync::OnceLock;

/// The allocator in the wasm: Talc, in place of Rust's default dlmalloc,
/// which was 7 KB of the module's code (BENCHMARKS.md, "Worker wasm size").
#[cfg(all(not(target_feature = "atomics"), target_family = "wasm"))]
#[global_allocator]
static ALLOCATOR: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

use worker::wasm_bindgen::prelude::wasm_bindgen;
use worker::{wasm_bindgen, web_sys, Env};

use crate::error::EdgeError;

/// The app of this isolate. Vars and secrets cannot change during an
/// isolate's life (a deploy or a secret change starts new isolates), so they
/// are read and checked on the first request only. A configuration error is
/// kept as well: re-reading could not fix it, and every request then gets the
/// same 500 `misconfigured` reply (logged each time) as before.
static APP: OnceLock<Result<app::App, error::EdgeError>> = OnceLock::new();

/// The entry, called by `worker/entry.js` for every request. It takes the
/// runtime's own request and answers the runtime's own response
/// (workers-rs' `Request` and `Response` are never built: see [`http`]).
/// It is what `#[event(fetch)]` would generate, run by [`exec`] instead of
/// wasm-bindgen's executor.
#[wasm_bindgen]
pub fn fetch(
    req: web_sys::Request,
    env: Env,
    ctx: worker::worker_sys::Context,
) -> wasm_bindgen::JsValue {
    exec::spawn(async move {
        match handle(req, env, ctx).await {
            Ok(resp) => Ok(resp.into()),
            // Only the runtime refusing to build a reply gets here; it then
            // answers 500 itself.
            Err(e) => {
                worker::console_error!("{e}");
                Err(wasm_bindgen::JsValue::from_str(
                    "the worker could not build a reply",
                ))
            }
        }
    })
}

async fn handle(
    req: web_sys::Request,
    env: Env,
    ctx: worker::worker_sys::Context,
) -> Result<web_sys::Response, EdgeError> {
    let req = http::Request::new(req);
    assets::bind(&env);
    let result = match APP.get_or_init(|| app::App::from_env(&env)) {
        Ok(app) => {
            #[cfg(feature = "probes")]
            if let Some(resp) = probe(&req, app).await {
                return resp.into_runtime();
            }
            app.handle(req, &ctx).await
        }
        Err(e) => Err(e.clone()),
    };
    let resp = match result {
        Ok(resp) => resp,
        Err(e) => http::error_response(&e)?,
    };
    resp.into_runtime()
}

/// Test builds only (feature `probes`; tests/system/tests/edge/probes.rs):
/// `/__panic/now` panics before any I/O, `/__panic/after-io` after a Redis
/// round trip (the panic then happens in a wake-up of the future, not in
/// the call from the runtime); the next request must be served by a fresh
/// instance. `/__probe/yield` wakes its own future from inside its poll
/// 1,000 times before answering, the case [`exec`] must not nest.
#[cfg(feature = "probes")]
async fn probe(req: &http::Request, app: &app::App) -> Option<http::Response> {
    match req.path().as_str() {
        "/__panic/now" => panic!("panic probe"),
        "/__panic/after-io" => {
            if let Ok(redis) = app.redis() {
                let _ = redis.ping().await;
            }
            panic!("panic probe, after I/O")
        }
        "/__probe/yield" => {
            let mut polls = 0u32;
            std::future::poll_fn(|cx| {
                polls += 1;
                if polls > 1_000 {
                    return std::task::Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            })
            .await;
            // A REST call after it: the task still wakes from a promise.
            let redis = app.redis().ok()?;
            let answer = match redis.ping().await {
                Ok(()) => format!("polled {polls} times, then PONG"),
                Err(e) => format!("polled {polls} times, then {e:?}"),
            };
            Some(http::Response::text(200, "text/plain", answer))
        }
        _ => None,
    }
}
