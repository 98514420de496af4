//! The executor's core, apart from JS: a per-thread table of tasks, each
//! polled at once when spawned and again where it is woken, never nested.
//! Time comes in as an argument, so the host tests can drive it.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};

/// A spawned future: it settles its own promise when it completes.
pub type Job = Pin<Box<dyn Future<Output = ()>>>;

/// A task: its future (absent while it is being polled) and whether it was
/// woken during its poll.
struct Task {
    future: Option<Job>,
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
pub const SWEEP_EVERY: u32 = 1_024;

/// A task's number: its slot in the table (low 32 bits) and the slot's
/// generation (high 32), so a waker of a task that is gone never reaches
/// the slot's next task.
type TaskId = u64;

/// The tasks, in slots reused once free: a number leads to its task in
/// one step, with a tenth of a hash map's code in the wasm.
#[derive(Default)]
struct Table {
    slots: Vec<Slot>,
    free: Vec<u32>,
    live: usize,
}

#[derive(Default)]
struct Slot {
    generation: u32,
    task: Option<Task>,
}

impl Table {
    fn insert(&mut self, task: Task) -> TaskId {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::default());
                // Past 2^32 live tasks the isolate is long out of memory.
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.task = Some(task);
        self.live += 1;
        (TaskId::from(slot.generation) << 32) | TaskId::from(index)
    }

    fn get_mut(&mut self, id: TaskId) -> Option<&mut Task> {
        let slot = self.slots.get_mut((id & 0xffff_ffff) as usize)?;
        if TaskId::from(slot.generation) != id >> 32 {
            return None;
        }
        slot.task.as_mut()
    }

    fn remove(&mut self, id: TaskId) -> Option<Task> {
        let index = (id & 0xffff_ffff) as u32;
        let slot = self.slots.get_mut(index as usize)?;
        if TaskId::from(slot.generation) != id >> 32 {
            return None;
        }
        let task = slot.task.take()?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(index);
        self.live -= 1;
        Some(task)
    }

    fn ids(&self, keep: impl Fn(&Task) -> bool) -> Vec<TaskId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.task.as_ref().is_some_and(&keep))
            .map(|(i, s)| (TaskId::from(s.generation) << 32) | i as TaskId)
            .collect()
    }
}

thread_local! {
    static TASKS: RefCell<Table> = RefCell::new(Table::default());
    static SPAWNED: Cell<u32> = const { Cell::new(0) };
}

/// Runs `job`, started at `now_ms` (epoch ms): polls it once now, and again
/// each time it is woken, until it completes.
pub fn spawn(job: Job, now_ms: f64) {
    let spawned = SPAWNED.with(|n| {
        let count = n.get();
        n.set(count.wrapping_add(1));
        count
    });
    if spawned.is_multiple_of(SWEEP_EVERY) {
        sweep(now_ms);
    }
    let task = Task {
        future: Some(job),
        woken: false,
        started: now_ms,
    };
    let id = TASKS.with(|t| t.borrow_mut().insert(task));
    run(id);
}

/// Drops the tasks started [`STALE_MS`] or more before `now_ms`. They are
/// taken out of the table first and dropped after it is released: dropping
/// a future runs its destructors, which may wake a task (this one's or
/// another's) and so reach into the table again.
fn sweep(now_ms: f64) {
    let stale: Vec<Task> = TASKS.with(|t| {
        let mut tasks = t.borrow_mut();
        let ids = tasks.ids(|task| now_ms - task.started >= STALE_MS);
        ids.into_iter().filter_map(|id| tasks.remove(id)).collect()
    });
    drop(stale);
}

/// The tasks not yet completed on this thread.
pub fn live() -> usize {
    TASKS.with(|t| t.borrow().live)
}

/// The waker: the task's number.
struct TaskWaker(TaskId);

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        run(self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        run(self.0);
    }
}

/// Polls task `id` until it is pending and not woken, or done. A call for a
/// task being polled (a wake-up from inside its own poll) only marks it; a
/// call for a task that is gone (completed, or swept) does nothing.
fn run(id: TaskId) {
    // `try_with`: a future dropped while the table itself is torn down (its
    // thread ending) may still wake; there is nothing left to run then.
    let taken = TASKS.try_with(|t| {
        let mut tasks = t.borrow_mut();
        let task = tasks.get_mut(id)?;
        let future = task.future.take();
        if future.is_none() {
            // Being polled further up the stack: poll once more after.
            task.woken = true;
        }
        future
    });
    let Some(mut future) = taken.ok().flatten() else {
        return;
    };
    let waker = Waker::from(Arc::new(TaskWaker(id)));
    let mut cx = Context::from_waker(&waker);
    loop {
        if future.as_mut().poll(&mut cx).is_ready() {
            // Out of the table before the future is dropped (below).
            let done = TASKS.with(|t| t.borrow_mut().remove(id));
            drop(done);
            return;
        }
        // Back into the table, unless it was woken meanwhile.
        let mut held = Some(future);
        let known = TASKS.with(|t| {
            let mut tasks = t.borrow_mut();
            let Some(task) = tasks.get_mut(id) else {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;
    use std::task::Poll;

    /// Counts polls and how deep they nest.
    #[derive(Default)]
    struct Probe {
        polls: Cell<u32>,
        depth: Cell<u32>,
        deepest: Cell<u32>,
        done: Cell<bool>,
    }

    impl Probe {
        fn enter(&self) {
            self.polls.set(self.polls.get() + 1);
            self.depth.set(self.depth.get() + 1);
            self.deepest.set(self.deepest.get().max(self.depth.get()));
        }
        fn leave(&self) {
            self.depth.set(self.depth.get() - 1);
        }
    }

    /// Spawns as the first task of a fresh thread's table, so no sweep runs
    /// unless a test asks for one.
    fn on_fresh_thread(test: impl FnOnce() + Send + 'static) {
        std::thread::spawn(test).join().expect("test thread");
    }

    #[test]
    fn a_freed_slot_is_reused_and_an_old_number_never_reaches_its_new_task() {
        let task = |started| Task {
            future: None,
            woken: false,
            started,
        };
        let mut t = Table::default();
        let a = t.insert(task(1.0));
        let b = t.insert(task(2.0));
        assert_ne!(a, b);
        assert_eq!(t.live, 2);
        assert_eq!(t.remove(a).map(|x| x.started), Some(1.0));
        assert!(t.remove(a).is_none() && t.get_mut(a).is_none(), "gone");
        let c = t.insert(task(3.0));
        assert_eq!(c & 0xffff_ffff, a & 0xffff_ffff, "the slot is reused");
        assert_ne!(c, a, "under another number");
        assert!(t.get_mut(a).is_none(), "the old number reaches nothing");
        assert_eq!(t.get_mut(c).map(|x| x.started), Some(3.0));
        assert_eq!(t.ids(|x| x.started > 2.5), vec![c]);
        assert_eq!(t.live, 2);
        assert!(t.get_mut(1 << 40).is_none() && t.remove(99).is_none());
    }

    #[test]
    fn a_future_that_wakes_itself_in_its_poll_is_polled_again_never_nested() {
        on_fresh_thread(|| {
            let probe = Rc::new(Probe::default());
            let p = probe.clone();
            spawn(
                Box::pin(std::future::poll_fn(move |cx| {
                    p.enter();
                    let polls = p.polls.get();
                    // Wakes itself from inside its own poll 1,000 times.
                    if polls <= 1_000 {
                        cx.waker().wake_by_ref();
                        p.leave();
                        return Poll::Pending;
                    }
                    p.done.set(true);
                    p.leave();
                    Poll::Ready(())
                })),
                0.0,
            );
            assert!(probe.done.get(), "completed without any outside wake-up");
            assert_eq!(probe.polls.get(), 1_001);
            assert_eq!(probe.deepest.get(), 1, "a wake-up inside a poll nested");
            assert_eq!(live(), 0);
        });
    }

    #[test]
    fn a_pending_future_runs_again_where_it_is_woken() {
        on_fresh_thread(|| {
            let slot: Rc<RefCell<Option<Waker>>> = Rc::default();
            let probe = Rc::new(Probe::default());
            let (s, p) = (slot.clone(), probe.clone());
            spawn(
                Box::pin(std::future::poll_fn(move |cx| {
                    p.enter();
                    p.leave();
                    if p.polls.get() < 3 {
                        *s.borrow_mut() = Some(cx.waker().clone());
                        return Poll::Pending;
                    }
                    p.done.set(true);
                    Poll::Ready(())
                })),
                0.0,
            );
            assert_eq!((probe.polls.get(), live()), (1, 1), "polled at once");
            let waker = slot.borrow_mut().take().expect("a waker was kept");
            waker.wake_by_ref();
            assert_eq!(probe.polls.get(), 2, "polled where it was woken");
            slot.borrow_mut().take().expect("kept again").wake();
            assert!(probe.done.get());
            assert_eq!(live(), 0, "a completed task leaves the table");
            // A waker used after its task finished does nothing.
            waker.wake();
            assert_eq!(probe.polls.get(), 3);
        });
    }

    /// A future whose destructor wakes it: dropping it must not happen while
    /// the table is borrowed (that would panic with a double borrow).
    struct WakesOnDrop {
        waker: Rc<RefCell<Option<Waker>>>,
        dropped: Rc<Cell<bool>>,
    }

    impl Future for WakesOnDrop {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    impl Drop for WakesOnDrop {
        fn drop(&mut self) {
            self.dropped.set(true);
            if let Some(w) = self.waker.borrow_mut().take() {
                w.wake();
            }
        }
    }

    #[test]
    fn the_sweep_drops_stale_tasks_outside_the_table_and_keeps_young_ones() {
        on_fresh_thread(|| {
            let stale = Rc::new(Cell::new(false));
            let young = Rc::new(Cell::new(false));
            let never = |dropped: &Rc<Cell<bool>>| {
                Box::pin(WakesOnDrop {
                    waker: Rc::default(),
                    dropped: dropped.clone(),
                })
            };
            // Task 0 (sweeps an empty table) is the stale one; task 1 starts
            // just inside the window of the sweep that task 1,024 runs.
            spawn(never(&stale), 0.0);
            let sweep_at = STALE_MS + 1.0;
            spawn(never(&young), 2.0);
            for _ in 2..SWEEP_EVERY {
                spawn(Box::pin(async {}), 1.0);
            }
            assert_eq!(live(), 2, "completed tasks are gone, pending ones kept");
            assert!(!stale.get());
            spawn(Box::pin(async {}), sweep_at);
            assert!(stale.get(), "the stale task was dropped");
            assert!(!young.get(), "a task younger than STALE_MS was kept");
            assert_eq!(live(), 1);
        });
    }

    #[test]
    fn a_task_dropped_by_its_own_completion_may_wake_others() {
        on_fresh_thread(|| {
            // A task that completes while holding a future that wakes on
            // drop: its drop happens after the table is released.
            let dropped = Rc::new(Cell::new(false));
            let inner = WakesOnDrop {
                waker: Rc::default(),
                dropped: dropped.clone(),
            };
            spawn(
                Box::pin(async move {
                    let mut inner = Box::pin(inner);
                    std::future::poll_fn(|cx| {
                        let _ = inner.as_mut().poll(cx);
                        Poll::Ready(())
                    })
                    .await;
                }),
                0.0,
            );
            assert!(dropped.get());
            assert_eq!(live(), 0);
        });
    }
}
