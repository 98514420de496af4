//! Runs the request's future to the runtime's `Promise` with fewer hops.
//!
//! wasm-bindgen's own executor (`future_to_promise`, what `#[event(fetch)]`
//! uses) polls a future only from a microtask: one `queueMicrotask` to start
//! it and one more each time it is woken, so a request with one REST call
//! crosses into JS and back twice more than it needs to. Here the future is
//! polled at once in the call from the runtime, and again right where it is
//! woken (a promise callback: the REST reply has come in), which is already
//! a microtask of the runtime's. A wake-up during a poll (a future that
//! yields) is remembered and polled again when that poll returns, never
//! nested.
//!
//! The task table is [`tasks`], free of JS so the host tests drive it; the
//! waker only carries a task's number (wasm has one thread, so no JS value
//! needs to cross threads and no `unsafe` is needed to build the waker). A
//! task whose wake-up never comes (the runtime cancels a request's I/O when
//! its client goes away) would stay in the table, so tasks older than any
//! request can run are dropped now and then ([`tasks::STALE_MS`]).

pub mod tasks;

use std::future::Future;

use worker::js_sys::{Date, Function, Promise};
use worker::wasm_bindgen::JsValue;

/// Runs `future`; the promise settles with its result.
pub fn spawn(future: impl Future<Output = Result<JsValue, JsValue>> + 'static) -> Promise {
    let mut settle: Option<(Function, Function)> = None;
    // The runtime calls the executor function before `Promise::new` returns.
    let promise = Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
    let Some((resolve, reject)) = settle else {
        return promise;
    };
    tasks::spawn(
        Box::pin(async move {
            let (settle, value) = match future.await {
                Ok(v) => (resolve, v),
                Err(e) => (reject, e),
            };
            // Settling a promise runs no code of ours synchronously.
            let _ = settle.call1(&JsValue::UNDEFINED, &value);
        }),
        Date::now(),
    );
    promise
}
