//! `redis-rest`: an Upstash-compatible REST gateway in front of a real
//! `redis-server`, so the edge worker speaks the same protocol in dev, tests
//! and production (where Upstash itself answers).
//!
//! A map of the crate, in the order a request travels:
//!
//! * [`config`] — flags (with environment fallbacks), defaults written once,
//!   and `validate()`.
//! * [`server`] — `run(listener, config, shutdown)`: the axum server and its
//!   graceful shutdown.
//! * [`auth`] — the bearer / `_token` check, in constant time.
//! * [`routes`] — the four request forms (`POST /`, `/CMD/arg/...`,
//!   `/pipeline`, `/multi-exec`) and the 404/405 fallbacks.
//! * [`protocol`] — data only: JSON arguments → Redis arguments, Redis replies
//!   → JSON (plain or `Upstash-Encoding: base64`), and which commands a shared
//!   connection must refuse.
//! * [`backend`] — the one multiplexed Redis connection, reconnecting, every
//!   call bounded by a timeout.
//! * [`stats`] — request and round-trip counters behind `GET /_stats`.
//! * [`error`] — one error enum and the one place that maps it to a status.

pub mod auth;
pub mod backend;
pub mod config;
pub mod error;
pub mod protocol;
pub mod routes;
pub mod server;
pub mod stats;

pub use config::Config;
pub use error::{GatewayError, StartError};
pub use server::run;
