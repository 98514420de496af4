//! queuegate's scheduler: admission for many queues under per-queue leases.
//!
//! `engine` runs the shared crate's scripts over redis-rs.

pub mod engine;
