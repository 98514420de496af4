//! What queuegate's benchmark binaries share: the Redis side of a bench
//! (a configured queue, pipelined script calls, `INFO commandstats`), a
//! seeded generator so runs repeat, the CPU time of the calling thread, the
//! drop day's draw timed and weighed (`draw_cost`), and
//! callgrind's instruction counts where CPU time is too noisy; the polling
//! (`poll_sim`) and a drop with a stock (`stock_sim`) in virtual time.

pub mod callgrind;
pub mod cpu_time;
pub mod draw_cost;
pub mod poll_sim;
pub mod redis_cost;
pub mod seeded;
pub mod stock_sim;
