//! Real processes for tests: `redis-server`, the REST gateway, the scheduler
//! and the worker under `wrangler dev`, each on a free loopback port.
//!
//! Every handle kills its process on drop and, when the test is failing,
//! prints the process log so the cause is in the test output. Readiness is
//! always polled; nothing waits a fixed time. No process starts from a
//! build older than its sources ([`fresh`]). [`Wrangler::local`] is the
//! worker's preset for a local stack ([`workerd::Workerd`] serves the same
//! build with the `workerd` binary alone, for benchmarks); [`now_ms`] and [`set_cookie_pair`]
//! are the clock and cookie reading the tests and tools share.
//!
//! With the `http` feature, the HTTP side of a stack: [`demo_origin`] (the
//! demo shop) and [`visitor`] (a browser-like client of the worker).
//!
//! What the benchmarks and the load tools measure is summarized here too,
//! once for all of them: [`measure`] (percentiles and means) and, with the
//! `charts` feature, [`chart`] (the look of their SVG charts).

#[cfg(feature = "charts")]
pub mod chart;
mod clock;
mod cookie;
#[cfg(feature = "http")]
pub mod counters;
#[cfg(feature = "http")]
pub mod demo_origin;
pub mod fresh;
pub mod gateway;
pub mod measure;
mod paths;
mod process;
mod redis_server;
pub mod scheduler;
#[cfg(feature = "http")]
pub mod visitor;
pub mod workerd;
mod wrangler;

pub use clock::{now_ms, since_epoch};
pub use cookie::set_cookie_pair;
pub use paths::{repo_root, target_bin};
pub use process::{free_port, http_get, port_open, wait_until, Process};
pub use redis_server::{RedisServer, RedisServerBuilder};
pub use wrangler::{
    offline_env, Wrangler, WranglerBuilder, COMPATIBILITY_DATE, IDENTITY_SECRET, ORIGIN_SECRET,
};

/// Address every test service binds: loopback only.
pub const LOOPBACK: &str = "127.0.0.1";
