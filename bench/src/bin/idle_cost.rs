//! What an idle room costs Redis (issue 27), and how soon admission
//! resumes when a visitor comes.
//!
//! `cargo run --release -p queuegate-bench --bin idle_cost [-- --scheduler PATH] [--seconds N] [--standbys N]`
//!
//! Starts a private redis-server and 1 + N scheduler processes (default:
//! this build's `queuegate-scheduler`; `--scheduler` runs another, e.g. an
//! older build, for a before/after figure) on one queue with idle
//! passthrough off, lets them settle, then counts every request the
//! schedulers sent for `--seconds` (default 60) with `MONITOR` (a script
//! call is one request), and every command with those a script runs
//! inside (what Upstash bills: docs/upstash.md): per second for the whole
//! idle room. Then one visitor enters the line (the
//! edge's `enter` script, as the worker runs it) and the bench times how
//! long until it holds a token, five times, the room idle again between.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use queuegate_shared::ops::{Enter, EnterReply};
use queuegate_shared::{Prefix, QueueId, QueueKeys, UserId};
use queuegate_testkit::{free_port, target_bin, RedisServer};

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Counts what clients sent during `window`, from `MONITOR` (`redis-cli
/// monitor`): the requests (every line but those of commands a script ran,
/// `[0 lua]`: a script call is one request) and the commands (every line:
/// a script call and the commands it ran inside, as Upstash counts them
/// for its bill, docs/upstash.md).
async fn requests(url: &str, window: Duration) -> Result<(u64, u64)> {
    let mut monitor = Command::new("redis-cli")
        .arg("-u")
        .arg(url)
        .arg("monitor")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("redis-cli monitor")?;
    let out = monitor.stdout.take().context("monitor's output")?;
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let (mut requests, mut commands) = (0u64, 0u64);
        for l in std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.contains(" ["))
        {
            commands += 1;
            if !l.contains(" lua]") {
                requests += 1;
            }
        }
        (requests, commands)
    });
    tokio::time::sleep(window).await;
    let _ = monitor.kill();
    let _ = monitor.wait();
    reader.join().map_err(|_| anyhow::anyhow!("monitor reader"))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let bin = arg("--scheduler").map_or_else(|| target_bin("queuegate-scheduler"), PathBuf::from);
    let seconds: u64 = arg("--seconds").map_or(Ok(60), |s| s.parse())?;
    let standbys: usize = arg("--standbys").map_or(Ok(1), |s| s.parse())?;
    let redis = RedisServer::start();
    let dir = std::env::temp_dir().join(format!("qg-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut children = Killed(Vec::new());
    for i in 0..=standbys {
        let config = dir.join(format!("s{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "[redis]\nurl = {:?}\n[http]\nlisten = \"127.0.0.1:{}\"\n[[queue]]\nid = \"main\"\nidle_passthrough = false\n",
                redis.url(),
                free_port()
            ),
        )?;
        let child = Command::new(&bin)
            .arg("--config")
            .arg(&config)
            .arg("run")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("start {}", bin.display()))?;
        children.0.push(child);
        // The first takes the lease; the others stand by.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut conn = redis::Client::open(redis.url())?
        .get_multiplexed_async_connection()
        .await?;
    // Long enough for an idle holder to wait instead of ticking (it does
    // after 10 s of idleness).
    tokio::time::sleep(Duration::from_secs(15)).await;
    let start = Instant::now();
    let (served, commands) = requests(&redis.url(), Duration::from_secs(seconds)).await?;
    let took = start.elapsed().as_secs_f64();
    println!(
        "scheduler {}: 1 holder + {standbys} standby, idle {took:.0} s: {served} requests, {:.2} per second; \
         {commands} commands with those scripts run inside, {:.2} per second",
        bin.display(),
        served as f64 / took,
        commands as f64 / took
    );

    let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main")?);
    let mut waits = Vec::new();
    for i in 0..5 {
        // Idle again (the previous visitor's slot is gone), long enough
        // for the holder to wait instead of ticking.
        let _: () = redis::cmd("DEL")
            .arg(keys.active())
            .query_async(&mut conn)
            .await?;
        tokio::time::sleep(Duration::from_secs(15)).await;
        let user = UserId::new(&format!("idle-visitor-{i}"))?;
        let entered = Instant::now();
        let op = Enter {
            keys: &keys,
            user: &user,
            guard: Default::default(),
            token: None,
        };
        let reply = queuegate_scheduler::engine::run(&mut conn, &op).await?;
        if !matches!(reply, EnterReply::Entered(_)) {
            bail!("visitor {i} did not enter: {reply:?}");
        }
        loop {
            let token: Option<String> = redis::cmd("GET")
                .arg(keys.token(&user))
                .query_async(&mut conn)
                .await?;
            if token.is_some() {
                break;
            }
            if entered.elapsed() > Duration::from_secs(30) {
                bail!("visitor {i} was not admitted within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        waits.push(entered.elapsed().as_millis());
    }
    println!("a visitor joining the idle line held a token after (ms): {waits:?}");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
