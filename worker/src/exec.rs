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
//! Tasks live in a per-isolate table; the waker only carries a task's number
//! (wasm has one thread, so no JS value needs to cross threads and no
//! `unsafe` is needed to build the waker). A task whose wake-up never comes
//! (the runtime cancels a request's I/O when its client goes away) would
//! stay in the table, so tasks older than any request can run are dropped
//! now and then ([`STALE_MS`]).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use worker::js_sys::{Date, Function, Promise};
use worker::wasm_bindgen::JsValue;

type Job = Pin<Box<dyn Future<Output = Result<JsValue, JsValue>>>>;

/// A task: its future (absent while it is being polled), the promise's
/// settle functions, and whether it was woken during its poll.
struct Task {
    future: Option<Job>,
    resolve: Function,
    reject: Function,
    woken: bool,
    /// Epoch ms of its start.
    started: f64,
}

/// A task this old belongs to a request the runtime cancelled: every wait
/// on a server is bounded (REST ≤ 30 s, the origin ≤ 120 s, Turnstile ≤ 10
/// s by their settings' limits). A client still sending a request body
/// after 10 minutes is the one case cut off with it.
pub const STALE_MS: f64 = 600_000.0;

/// Every this many tasks, the stale ones are dropped.
const SWEEP_EVERY: u32 = 1_024;

thread_local! {
    static TASKS: RefCell<HashMap<u32, Task>> = RefCell::new(HashMap::new());
    static NEXT_ID: Cell<u32> = const { Cell::new(0) };
}

/// Runs `future`; the promise settles with its result.
pub fn spawn(future: impl Future<Output = Result<JsValue, JsValue>> + 'static) -> Promise {
    let id = NEXT_ID.with(|n| {
        let id = n.get();
        n.set(id.wrapping_add(1));
        id
    });
    let started = Date::now();
    if id.is_multiple_of(SWEEP_EVERY) {
        TASKS.with(|t| {
            t.borrow_mut()
                .retain(|_, task| started - task.started < STALE_MS)
        });
    }
    let mut future: Option<Job> = Some(Box::pin(future));
    let promise = Promise::new(&mut |resolve, reject| {
        let task = Task {
            future: future.take(),
            resolve,
            reject,
            woken: false,
            started,
        };
        TASKS.with(|t| t.borrow_mut().insert(id, task));
    });
    run(id);
    promise
}

/// The waker: the task's number.
struct TaskWaker(u32);

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        run(self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        run(self.0);
    }
}

/// Polls task `id` until it is pending and not woken, or done. A call for a
/// task being polled (a wake-up from inside its own poll) only marks it.
fn run(id: u32) {
    let Some(mut future) = TASKS.with(|t| {
        let mut tasks = t.borrow_mut();
        let task = tasks.get_mut(&id)?;
        let future = task.future.take();
        if future.is_none() {
            // Being polled further up the stack: poll once more after.
            task.woken = true;
        }
        future
    }) else {
        return;
    };
    let waker = Waker::from(Arc::new(TaskWaker(id)));
    let mut cx = Context::from_waker(&waker);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(result) => {
                let Some(task) = TASKS.with(|t| t.borrow_mut().remove(&id)) else {
                    return;
                };
                let (settle, value) = match result {
                    Ok(v) => (task.resolve, v),
                    Err(e) => (task.reject, e),
                };
                // Settling a promise runs no code of ours synchronously.
                let _ = settle.call1(&JsValue::UNDEFINED, &value);
                return;
            }
            Poll::Pending => {
                // Back into the table, unless it was woken meanwhile.
                let mut held = Some(future);
                let known = TASKS.with(|t| {
                    let mut tasks = t.borrow_mut();
                    let Some(task) = tasks.get_mut(&id) else {
                        return false;
                    };
                    if !std::mem::take(&mut task.woken) {
                        task.future = held.take();
                    }
                    true
                });
                match held {
                    Some(f) if known => future = f,
                    _ => return,
                }
            }
        }
    }
}
