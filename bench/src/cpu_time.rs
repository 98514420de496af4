//! CPU time of a thread from Linux's schedstat (its first field:
//! nanoseconds on a CPU). On a shared machine wall time includes waiting
//! for a core; CPU time is what the work itself took.

use std::time::Duration;

fn schedstat(path: &str) -> Option<Duration> {
    let text = std::fs::read_to_string(path).ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// The calling thread's CPU time so far, or None where the kernel does not
/// offer it. The kernel refreshes a running thread's figure at scheduler
/// ticks, so read it around long stretches (a batch), not one short call.
pub fn thread_cpu_time() -> Option<Duration> {
    schedstat("/proc/thread-self/schedstat")
}

/// The CPU time of another process's main thread (a redis-server runs
/// every command on it), or None where the kernel does not offer it.
/// Exact when read while that thread waits for work.
pub fn main_thread_cpu_time(pid: u32) -> Option<Duration> {
    schedstat(&format!("/proc/{pid}/task/{pid}/schedstat"))
}
