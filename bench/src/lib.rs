//! What queuegate's benchmark binaries share: the Redis side of a bench
//! (a configured queue, pipelined script calls, `INFO commandstats`), a
//! seeded generator so runs repeat, the CPU time of the calling thread, and
//! callgrind's instruction counts where CPU time is too noisy.

pub mod callgrind;
pub mod cpu_time;
pub mod poll_sim;
pub mod redis_cost;
pub mod seeded;
