//! Runs the request's future with fewer hops: to its value when it
//! completes in the call from the runtime, else to a `Promise`.
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

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use worker::js_sys::{Date, Function, Promise};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::worker_sys::Context;

/// Runs `future`. What the runtime gets back: the future's value itself
/// when it completed in this call (a far-back poll answered from the
/// snapshot needs no I/O), else a promise that settles with it. The
/// runtime takes either from a `fetch` handler; a promise costs the
/// executor function, the settle call and a microtask.
pub fn spawn(future: impl Future<Output = Result<JsValue, JsValue>> + 'static) -> JsValue {
    let outcome = Rc::new(RefCell::new(Outcome::Running));
    let job = outcome.clone();
    tasks::spawn(
        Box::pin(async move {
            let result = future.await;
            let waiting = std::mem::replace(&mut *job.borrow_mut(), Outcome::Running);
            match waiting {
                // Settling a promise runs no code of ours synchronously.
                Outcome::Waiting { resolve, reject } => {
                    let _ = match result {
                        Ok(v) => resolve.call1(&JsValue::UNDEFINED, &v),
                        Err(e) => reject.call1(&JsValue::UNDEFINED, &e),
                    };
                }
                _ => *job.borrow_mut() = Outcome::Done(result),
            }
        }),
        Date::now(),
    );
    let done = std::mem::replace(&mut *outcome.borrow_mut(), Outcome::Running);
    match done {
        Outcome::Done(Ok(value)) => value,
        Outcome::Done(Err(e)) => Promise::reject(&e).into(),
        _ => {
            let mut settle: Option<(Function, Function)> = None;
            // The runtime calls the executor function before
            // `Promise::new` returns.
            let promise = Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
            if let Some((resolve, reject)) = settle {
                *outcome.borrow_mut() = Outcome::Waiting { resolve, reject };
            }
            promise.into()
        }
    }
}

/// Runs `future` past the reply, in the runtime's `waitUntil` (when it
/// does not complete at once). workers-rs' `Context::wait_until` would
/// bring wasm-bindgen's executor (`future_to_promise`) into the wasm for
/// this one call.
pub fn wait_until(ctx: &Context, future: impl Future<Output = ()> + 'static) {
    let settled = spawn(async move {
        future.await;
        Ok(JsValue::UNDEFINED)
    });
    if let Ok(promise) = settled.dyn_into::<Promise>() {
        // Fails only outside a request, which a future of ours never is.
        let _ = ctx.wait_until(&promise);
    }
}

/// Where a spawned future's result goes: kept for [`spawn`] to return
/// when it completed during the call, else to the promise handed out.
enum Outcome {
    Running,
    Done(Result<JsValue, JsValue>),
    Waiting { resolve: Function, reject: Function },
}
