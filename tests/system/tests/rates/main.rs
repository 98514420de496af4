//! Tests that measure admission rates and hand-over times on a small
//! machine: scheduler faults (kill -9, SIGTERM, a Redis restart) and origin
//! control. Nothing else is in this binary, and they run one at a time.

mod origin_control;
mod scheduler;

/// Held by every test here: one at a time, as when each file was its own
/// binary and its tests took a lock of their own.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
