//! The queue engine's scripts (shared/lua + shared/src/ops) against a real
//! redis-server, no other process.

mod line;
mod origin_window;
