//! queuegate's scheduler: admission for many queues under per-queue leases.
//!
//! * [`config`] — the TOML config, env overrides and their validation (and
//!   URL redaction).
//! * [`service`] — `run(config, shutdown)`: the HTTP listener and one task per queue.
//! * [`queue`] — one queue's loop, sequencing each tick; one module per
//!   concern: the lease, reloaded settings, origin steering, the draw and
//!   admission.
//! * [`draw`] — the pre-queue's draw: the pinned permutation and
//!   [`draw::Placement`], the batch loop the system tests and bench drive too.
//! * [`admission`] — the rate estimate and backoff (pure).
//! * [`control`] — origin control: the AIMD rate from the origin's answers (pure).
//! * [`connect`] — one Redis handle for a server or a cluster.
//! * [`engine`] — runs the shared crate's scripts over redis-rs.
//! * [`metrics`] and [`http`] — Prometheus metrics, `/healthz`, `/metrics`.
//! * [`cli`] — `run` and the operator commands, with their exit codes.
//! * [`actions`] — each operator action once, one file each, as one
//!   [`actions::Action`] the CLI and the admin API parse into.
//! * [`admin`] — the admin API (token-authenticated, its own listener).
//! * [`audit`] — who did what: the audit log line and its metric.
//! * [`runtime`] — settings at run time: kept in Redis, over the file's.

pub mod actions;
pub mod admin;
pub mod admission;
pub mod audit;
pub mod beacon;
pub mod cli;
pub mod config;
pub mod connect;
pub mod control;
pub mod draw;
pub mod engine;
pub mod http;
pub mod metrics;
pub mod queue;
pub mod reveal;
pub mod runtime;
pub mod service;
