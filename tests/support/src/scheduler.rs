//! The `queuegate-scheduler` as a real process (filled in with the scheduler).
