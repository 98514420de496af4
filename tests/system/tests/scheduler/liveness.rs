//! Liveness independent of settings (issue #37): `abandon_after_ms` or
//! `sleep_grace_ms` changed at run time (`settings --set`), by a SIGHUP
//! reload, or by a standby whose file differs taking the lease, while a
//! line waits and keeps polling. Nobody who polled within the window in
//! force before the change is dropped by it. The real scheduler binaries on
//! a real redis-server; visitors poll through the position script, as the
//! edge does. The queue is paused, so nobody leaves the line but leavers
//! (the tick's rolling scan still drops them), and the whole line is near.

use std::time::{Duration, Instant};

use queuegate_shared::fields::{config as cf, stats as sf};
use queuegate_shared::ops::SetState;
use queuegate_shared::{QueueState, Settings};
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::scheduler::{self, Scheduler};
use queuegate_testkit::RedisServer;

/// Visitors who keep polling.
const N: usize = 120;

/// Abandon after 4 s, no sleep grace (user 0 is the silent one: it shows
/// the scan runs and still drops a leaver).
fn settings(abandon_after_ms: u64, sleep_grace_ms: u64) -> Settings {
    Settings {
        abandon_after_ms,
        sleep_grace_ms,
        poll_min_ms: 200,
        poll_max_ms: 1_000,
        idle_passthrough: false,
        ..Settings::default()
    }
}

/// A paused queue with users 0..=n in line, published with `s`.
async fn paused_line(redis: &RedisServer, s: &Settings, n: usize) -> TestQueue {
    let q = TestQueue::open(&redis.url(), "main", s.clone()).await;
    q.run(&SetState {
        keys: &q.keys,
        state: QueueState::Paused,
        expect: None,
    })
    .await
    .expect("pause");
    for i in 0..=n {
        q.enter(&user(i)).await;
    }
    q
}

/// Users `from..=to` poll every 300 ms until the task is aborted.
fn keep_polling(q: &TestQueue, from: usize, to: usize) -> tokio::task::JoinHandle<()> {
    let q = q.clone();
    tokio::spawn(async move {
        loop {
            let started = Instant::now();
            for i in from..=to {
                q.position(&user(i)).await;
            }
            tokio::time::sleep(Duration::from_millis(300).saturating_sub(started.elapsed())).await;
        }
    })
}

/// Waits (up to `secs`) until `check` holds.
async fn until<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn published(q: &TestQueue, field: &str, value: u64) {
    until(15, &format!("{field} = {value} published"), || async {
        q.config_field(field).await == value.to_string()
    })
    .await;
}

/// For `span` after a change: the line stays whole (`waiting` in it) and
/// nobody more than `abandoned` is dropped.
async fn nobody_dropped(q: &TestQueue, span: Duration, waiting: u64, abandoned: i64, log: &str) {
    let end = Instant::now() + span;
    while Instant::now() < end {
        assert_eq!(
            q.stat(sf::ABANDONED).await,
            abandoned,
            "visitors who kept polling were dropped (waiting {}); scheduler log:\n{log}",
            q.zcard(&q.keys.waiting()).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(q.zcard(&q.keys.waiting()).await, waiting);
}

/// The silent user 0 is dropped: the lease holder ticks and scans.
async fn the_silent_one_is_dropped(q: &TestQueue) {
    until(15, "the silent visitor dropped", || async {
        q.stat(sf::ABANDONED).await == 1
    })
    .await;
}

fn settings_cli(s: &Scheduler, args: &[&str]) {
    let out = scheduler::command(s.config_path(), args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reproduction 1: `settings --set abandon_after_ms` raised (4 s → 120 s)
/// and then lowered back (`--unset`, the file's 4 s) while 120 visitors
/// wait and poll: before issue #37, 120 of 120 were dropped within a
/// second of each change (every bucket renumbered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandon_after_changed_at_run_time_drops_nobody_who_polls() {
    let redis = RedisServer::start();
    let s = settings(4_000, 4_000);
    let q = paused_line(&redis, &s, N).await;
    let polling = keep_polling(&q, 1, N);
    let sched = Scheduler::builder(&redis.url())
        .queue_settings("main", &s)
        .start();
    the_silent_one_is_dropped(&q).await;

    settings_cli(
        &sched,
        &["settings", "main", "--set", "abandon_after_ms=120000"],
    );
    published(&q, cf::ABANDON_AFTER_MS, 120_000).await;
    nobody_dropped(&q, Duration::from_secs(3), N as u64, 1, &sched.log()).await;

    settings_cli(&sched, &["settings", "main", "--unset", "abandon_after_ms"]);
    published(&q, cf::ABANDON_AFTER_MS, 4_000).await;
    assert!(
        q.config_field(cf::SEEN_PREV).await.starts_with("120000|"),
        "the raised window stays in force a while: {}",
        q.config_field(cf::SEEN_PREV).await
    );
    nobody_dropped(&q, Duration::from_secs(3), N as u64, 1, &sched.log()).await;
    polling.abort();
}

/// Reproduction 2: a SIGHUP reload whose file raises `abandon_after_ms`
/// (4 s → 60 s), then one that lowers it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changing_abandon_after_drops_nobody_who_polls() {
    let redis = RedisServer::start();
    let s = settings(4_000, 4_000);
    let q = paused_line(&redis, &s, N).await;
    let polling = keep_polling(&q, 1, N);
    let sched = Scheduler::builder(&redis.url())
        .queue_settings("main", &s)
        .start();
    the_silent_one_is_dropped(&q).await;

    let path = sched.config_path().to_path_buf();
    let text = std::fs::read_to_string(&path).expect("config");
    let raised = text.replace("abandon_after_ms = 4000", "abandon_after_ms = 60000");
    assert_ne!(raised, text);
    std::fs::write(&path, &raised).expect("rewrite config");
    sched.sighup();
    published(&q, cf::ABANDON_AFTER_MS, 60_000).await;
    nobody_dropped(&q, Duration::from_secs(3), N as u64, 1, &sched.log()).await;

    std::fs::write(&path, &text).expect("rewrite config");
    sched.sighup();
    published(&q, cf::ABANDON_AFTER_MS, 4_000).await;
    nobody_dropped(&q, Duration::from_secs(3), N as u64, 1, &sched.log()).await;
    polling.abort();
}

/// Reproduction 3: the lease holder is killed and a standby whose file
/// says `abandon_after_ms = 60000` takes the lease. Before issue #37 it
/// published its file's value and 150 of 150 were dropped within about
/// 2 s; now a standby whose file differs keeps the published settings
/// (docs/scheduler.md, *Fail-over with different files*), and either way
/// nobody who polls is dropped. Its file then goes in force the way an
/// operator puts one there, a SIGHUP of the new holder: a change of the
/// window, which drops nobody either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_with_another_abandon_after_taking_the_lease_drops_nobody_who_polls() {
    let redis = RedisServer::start();
    let s = settings(4_000, 4_000);
    let q = paused_line(&redis, &s, N).await;
    let polling = keep_polling(&q, 1, N);
    let mut holder = Scheduler::builder(&redis.url())
        .queue_settings("main", &s)
        .start();
    the_silent_one_is_dropped(&q).await;
    let lock = || async {
        let mut conn = q.conn.clone();
        let owner: Option<String> = redis::cmd("GET")
            .arg(q.keys.lock())
            .query_async(&mut conn)
            .await
            .expect("get");
        owner.unwrap_or_default()
    };
    let first = lock().await;
    let standby = Scheduler::builder(&redis.url())
        .queue_settings("main", &settings(60_000, 60_000))
        .start();
    until(15, "the standby answers its health check", || async {
        standby.health().is_some()
    })
    .await;
    assert_eq!(q.config_field(cf::ABANDON_AFTER_MS).await, "4000");

    holder.kill();
    until(15, "the standby holds the lease", || async {
        let owner = lock().await;
        !owner.is_empty() && owner != first
    })
    .await;
    nobody_dropped(&q, Duration::from_secs(4), N as u64, 1, &standby.log()).await;

    standby.sighup();
    published(&q, cf::ABANDON_AFTER_MS, 60_000).await;
    nobody_dropped(&q, Duration::from_secs(3), N as u64, 1, &standby.log()).await;
    polling.abort();
}

/// Reproduction 4: the sleep grace. Visitors who polled once and went
/// silent (phones asleep) are past `abandon_after_ms` but within their
/// grace when it changes at run time, raised (20 s → 60 s) and lowered
/// (60 s → 10 s, for sleepers who went silent under 60 s): each keeps it.
/// Before issue #37 the change renumbered the `grace:` buckets and every
/// sleeper was dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_time_change_of_the_sleep_grace_keeps_every_sleeper_its_grace() {
    const SLEEPERS: usize = 60;
    let redis = RedisServer::start();
    let s = settings(2_000, 20_000);
    // Users 1..=60 sleep from their enter on (user 0 too: no silent
    // baseline here, every sleeper is within its grace).
    let q = paused_line(&redis, &s, SLEEPERS).await;
    let sched = Scheduler::builder(&redis.url())
        .queue_settings("main", &s)
        .start();
    // Past abandon_after (2 s, at most 2.5 s): asleep, not alive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(q.stat(sf::ABANDONED).await, 0);

    settings_cli(
        &sched,
        &["settings", "main", "--set", "sleep_grace_ms=60000"],
    );
    published(&q, cf::SLEEP_GRACE_MS, 60_000).await;
    nobody_dropped(
        &q,
        Duration::from_secs(3),
        SLEEPERS as u64 + 1,
        0,
        &sched.log(),
    )
    .await;

    // New sleepers under the 60 s grace, then the grace lowered to 10 s.
    for i in SLEEPERS + 1..=2 * SLEEPERS {
        q.enter(&user(i)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    settings_cli(
        &sched,
        &["settings", "main", "--set", "sleep_grace_ms=10000"],
    );
    published(&q, cf::SLEEP_GRACE_MS, 10_000).await;
    nobody_dropped(
        &q,
        Duration::from_secs(3),
        2 * SLEEPERS as u64 + 1,
        0,
        &sched.log(),
    )
    .await;
    assert!(
        q.config_field(cf::GRACE_PREV).await.contains("60000|"),
        "{}",
        q.config_field(cf::GRACE_PREV).await
    );
}
