//! The queue engine's scripts (shared/lua + shared/src/ops) against a real
//! redis-server, no other process: one server for the binary, each test on
//! its own queue, except the tests that watch every key or flush scripts.

mod line;
mod origin_window;
mod seam;
mod sleep;
