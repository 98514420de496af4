//! The local demo and its measurements: [`stack`] starts the whole waiting
//! room (redis-server, gateway, scheduler, the worker under `wrangler dev`,
//! a demo shop), [`crowd`] sends synthetic visitors through it, and [`load`]
//! drives a measured flash-sale crowd and reports figures (`queuegate-load`);
//! [`origin_bench`] measures origin control (`queuegate-origin-bench`);
//! [`verify`] checks a draw's public record (`queuegate-verify`).

pub mod crowd;
pub mod edge_bench;
pub mod load;
pub mod origin_bench;
pub mod stack;
pub mod turnstile_stand_in;
pub mod verify;

/// The demo shop lives in the testkit, beside the system tests that start it.
pub use queuegate_testkit::demo_origin;
