//! The Redis side of a bench: a configured queue on a private server,
//! script calls sent pipelined, and their cost read from `INFO
//! commandstats` (usec_per_call, reset per phase, so client and network
//! time are excluded).

use anyhow::{Context, Result};
use queuegate_scheduler::engine;
use queuegate_shared::ops::{Configure, Enter};
use queuegate_shared::{Invocation, Operation, QueueKeys, QueueState, Settings, UserId};
use redis::aio::MultiplexedConnection;

/// Commands per pipeline: enough to keep the server busy, small enough
/// not to queue megabytes in the client.
pub const PIPELINE: usize = 100;

/// Publishes `settings` (queue open), takes the scheduler lock as
/// `bench` (so admit runs) and loads every script, so EVALSHA never
/// misses.
pub async fn prepare_queue(
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    settings: &Settings,
) -> Result<()> {
    engine::run(
        conn,
        &Configure {
            keys,
            settings,
            initial_state: QueueState::Open,
        },
    )
    .await?;
    redis::cmd("SET")
        .arg(keys.lock())
        .arg("bench")
        .exec_async(conn)
        .await?;
    for script in queuegate_shared::script::all() {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source())
            .query_async(conn)
            .await?;
    }
    Ok(())
}

/// `depth` waiting users `user(0..depth)`, built with the enter script
/// itself (pipelined, no guard), so memory is what real entries cost.
pub async fn fill(
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    depth: usize,
    user: impl Fn(usize) -> UserId,
) -> Result<()> {
    for start in (0..depth).step_by(1_000) {
        let mut pipe = redis::pipe();
        for n in start..(start + 1_000).min(depth) {
            let u = user(n);
            add_eval(
                &mut pipe,
                &Enter {
                    keys,
                    user: &u,
                    guard: Default::default(),
                    token: None,
                }
                .invocation(),
            );
        }
        let _: Vec<redis::Value> = pipe.query_async(conn).await?;
    }
    Ok(())
}

/// Sends `add(pipe, 0)` outside the measured window, resets the stats,
/// sends `add(pipe, 1..calls)` in pipelines and returns the usec_per_call
/// of `stat` (a lowercase command name, e.g. `evalsha`).
pub async fn phase(
    conn: &mut MultiplexedConnection,
    calls: usize,
    stat: &str,
    mut add: impl FnMut(&mut redis::Pipeline, usize),
) -> Result<f64> {
    let mut warm = redis::pipe();
    add(&mut warm, 0);
    let _: Vec<redis::Value> = warm.query_async(conn).await?;
    reset_stats(conn).await?;
    for start in (1..calls).step_by(PIPELINE) {
        let mut pipe = redis::pipe();
        for i in start..(start + PIPELINE).min(calls) {
            add(&mut pipe, i);
        }
        let _: Vec<redis::Value> = pipe.query_async(conn).await?;
    }
    usec_per_call(conn, stat).await
}

/// Adds `EVAL <source> ...` (the first call of a script on a server).
pub fn add_eval(pipe: &mut redis::Pipeline, inv: &Invocation) {
    pipe.cmd("EVAL")
        .arg(inv.script.source())
        .arg(inv.keys.len())
        .arg(&inv.keys)
        .arg(&inv.args);
}

pub use queuegate_scheduler::engine::pipe_evalsha as add_evalsha;

/// Zeroes `INFO commandstats`, so the next read covers one phase only.
pub async fn reset_stats(conn: &mut MultiplexedConnection) -> Result<()> {
    Ok(redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .exec_async(conn)
        .await?)
}

async fn info(conn: &mut MultiplexedConnection, section: &str) -> Result<String> {
    Ok(redis::cmd("INFO").arg(section).query_async(conn).await?)
}

/// Mean server-side microseconds per call of `command` since the reset.
pub async fn usec_per_call(conn: &mut MultiplexedConnection, command: &str) -> Result<f64> {
    let text = info(conn, "commandstats").await?;
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("cmdstat_{command}:")))
        .with_context(|| format!("no commandstats for {command}"))?;
    let value = line
        .split(',')
        .find_map(|kv| kv.strip_prefix("usec_per_call="))
        .context("usec_per_call")?;
    Ok(value.parse()?)
}

/// Commands Redis ran per call of `command` since the reset, the call
/// itself included: for a script, 1 + the commands it ran inside (which
/// `INFO commandstats` counts under their own names) — what a database
/// that bills every command counts. `INFO` and `CONFIG` (the bench's own)
/// are left out.
pub async fn commands_per_call(conn: &mut MultiplexedConnection, command: &str) -> Result<f64> {
    let text = info(conn, "commandstats").await?;
    let mut total = 0u64;
    let mut own = 0u64;
    for line in text.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let calls: u64 = rest
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .context("calls")?
            .parse()?;
        if name == command {
            own = calls;
        }
        if !name.starts_with("info") && !name.starts_with("config") {
            total += calls;
        }
    }
    if own == 0 {
        anyhow::bail!("no calls of {command} since the reset");
    }
    Ok(total as f64 / own as f64)
}

/// The server's `process_id`, for reading its CPU time.
pub async fn server_pid(conn: &mut MultiplexedConnection) -> Result<u32> {
    let text = info(conn, "server").await?;
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .context("process_id")?;
    Ok(value.trim().parse()?)
}

/// The server's `used_memory`, in bytes.
pub async fn used_memory(conn: &mut MultiplexedConnection) -> Result<i64> {
    let text = info(conn, "memory").await?;
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .context("used_memory")?;
    Ok(value.trim().parse()?)
}

/// The bench's n-th visitor id: 22 characters, the length of the worker's
/// visitor ids; `[a-z0-9]` only, which `UserId` always accepts.
pub fn bench_user(n: usize) -> queuegate_shared::UserId {
    // The format is a valid user id for every n.
    #[allow(clippy::expect_used)]
    queuegate_shared::UserId::new(&format!("v{n:021}")).expect("a valid user id")
}

/// Queue depths from the first argument that is not a `--flag`
/// (`1000,100000`), or `default`.
pub fn depths_arg(default: &[usize]) -> Result<Vec<usize>> {
    match std::env::args().skip(1).find(|a| !a.starts_with("--")) {
        Some(list) => list
            .split(',')
            .map(|d| d.trim().parse().context("depths: comma-separated numbers"))
            .collect(),
        None => Ok(default.to_vec()),
    }
}
