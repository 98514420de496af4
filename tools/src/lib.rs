//! The local demo: [`stack`] starts the whole waiting room (redis-server,
//! gateway, scheduler, the worker under `wrangler dev`, a demo shop), and
//! [`crowd`] sends synthetic visitors through it.

pub mod crowd;
pub mod demo_origin;
pub mod stack;
