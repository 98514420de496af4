//! The scheduler as real processes under faults: kill -9 during admission,
//! several schedulers at once, SIGTERM hand-over and a Redis restart. The
//! tests run one at a time (they measure rates and hand-over times on a
//! small machine) and each stays within seconds.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_shared::ops::{EnterReply, Observed};
use queuegate_shared::state::UserState;
use queuegate_shared::{Prefix, QueueId, QueueKeys, Settings};
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::scheduler::{Scheduler, SchedulerBuilder};
use queuegate_testkit::{wait_until, RedisServer};
use tokio::runtime::Runtime;

/// Rate and hand-over measurements share two cores: one test at a time
/// (with the binary's other tests too). Taken outside any runtime.
fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    super::ONE_AT_A_TIME.blocking_lock()
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A handle on a queue the scheduler publishes (the test never configures
/// it itself); `settings` mirrors the scheduler's for the checks.
fn queue(rt: &Runtime, redis: &RedisServer, id: &str, settings: Settings) -> TestQueue {
    let conn = rt.block_on(TestQueue::connect(&redis.url()));
    TestQueue {
        keys: QueueKeys::new(&Prefix::default(), &QueueId::new(id).expect("queue id")),
        settings,
        conn,
    }
}

fn builder(redis: &RedisServer, id: &str, s: &Settings) -> SchedulerBuilder {
    Scheduler::builder(&redis.url()).queue_settings(id, s)
}

async fn holder(q: &TestQueue) -> Option<String> {
    let mut conn = q.conn.clone();
    redis::cmd("GET")
        .arg(q.keys.lock())
        .query_async(&mut conn)
        .await
        .expect("GET lock")
}

/// The pid in an owner id `host/pid/nonce`.
fn pid_of(owner: &str) -> Option<u32> {
    owner.split('/').nth(1)?.parse().ok()
}

/// Enters `n` users (ids `from..from+n`) and waits until all are in line.
async fn fill(q: &TestQueue, from: usize, n: usize) {
    for i in from..from + n {
        match q.enter(&user(i)).await {
            EnterReply::Entered(_) => {}
            other => panic!("enter {i}: {other:?}"),
        }
    }
}

/// Samples |active| every few ms until stopped; returns the largest seen.
fn watch_active(rt: &Runtime, q: &TestQueue, stop: Arc<AtomicBool>) -> Arc<AtomicU64> {
    let max = Arc::new(AtomicU64::new(0));
    let (q, seen) = (q.clone(), max.clone());
    rt.spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let n = q.zcard(&q.keys.active()).await;
            seen.fetch_max(n, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    max
}

/// A small deterministic PRNG (xorshift) for kill timing and poll picks.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Every entered user is in exactly one state, and the states add up to
/// the counters: waiting = |waiting|, abandoned = stats.abandoned,
/// admitted + expired (no consumes here) = stats.admitted.
async fn assert_every_user_accounted(q: &TestQueue, users: usize) {
    let mut by_state: HashMap<&'static str, i64> = HashMap::new();
    let mut conn = q.conn.clone();
    for i in 0..users {
        let u = user(i);
        let state = match q.position(&u).await {
            Observed::Waiting(_) => "waiting",
            Observed::Settled(UserState::Admitted { .. }) => "admitted",
            Observed::Settled(UserState::Expired) => "expired",
            Observed::Settled(UserState::Abandoned) => "abandoned",
            other => panic!("user {i} is lost or in an impossible state: {other:?}"),
        };
        *by_state.entry(state).or_default() += 1;
        // The raw records agree: in line XOR holding a token (with a slot).
        let (ticket, token, slot): (Option<f64>, bool, Option<f64>) = redis::pipe()
            .zscore(q.keys.waiting(), u.as_str())
            .exists(q.keys.token(&u))
            .zscore(q.keys.active(), u.as_str())
            .query_async(&mut conn)
            .await
            .expect("read a user's records");
        if ticket.is_some() {
            assert!(
                !token && slot.is_none(),
                "user {i} waits and holds a token/slot"
            );
        }
        if token {
            assert!(slot.is_some(), "user {i} holds a token without a slot");
        }
    }
    let get = |k| by_state.get(k).copied().unwrap_or(0);
    assert_eq!(get("waiting"), q.zcard(&q.keys.waiting()).await as i64);
    assert_eq!(get("abandoned"), q.stat("abandoned").await, "{by_state:?}");
    assert_eq!(
        get("admitted") + get("expired"),
        q.stat("admitted").await,
        "{by_state:?}"
    );
    assert_eq!(users as i64, q.stat("entered").await);
}

#[test]
fn kill_9_fifty_times_during_admission_loses_nobody_and_never_over_admits() {
    let _serial = serial();
    let rt = runtime();
    let redis = RedisServer::start();
    // Short lease so 50 crash hand-overs fit in ~30 s; short token and
    // abandon times so slots expire and leavers are dropped meanwhile.
    let settings = Settings {
        tick_ms: 50,
        lease_ttl_ms: 450,
        admit_rate_per_second: 400.0,
        max_active: 100,
        token_ttl_ms: 1_000,
        activation_jitter_ms: 100,
        status_ttl_ms: 600_000,
        abandon_after_ms: 2_000,
        sleep_grace_ms: 2_000,
        poll_min_ms: 100,
        poll_max_ms: 1_000,
        in_flight_ms: 1_000,
        retry_window_ms: 1_000,
        ..Settings::default()
    };
    let q = queue(&rt, &redis, "crash", settings.clone());
    let b = builder(&redis, "crash", &settings).redis_option("response_timeout_ms", "150");
    let mut fleet: Vec<Scheduler> = vec![b.clone().start(), b.clone().start()];

    // A stream of distinct users entering (200/s); some waiting users poll.
    let stop = Arc::new(AtomicBool::new(false));
    let max_active = watch_active(&rt, &q, stop.clone());
    let stream = {
        let (q, stop) = (q.clone(), stop.clone());
        rt.spawn(async move {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut n = 0;
            let mut every = tokio::time::interval(Duration::from_millis(5));
            while !stop.load(Ordering::Relaxed) {
                every.tick().await;
                match q.enter(&user(n)).await {
                    EnterReply::Entered(_) => n += 1,
                    other => panic!("enter {n}: {other:?}"),
                }
                let pick = (rng.next() % n as u64) as usize;
                let _ = q.position(&user(pick)).await;
            }
            n
        })
    };

    let mut rng = Rng(42);
    let kills = 50;
    let started = Instant::now();
    for round in 0..kills {
        let before = rt.block_on(q.stat("admitted"));
        let mut leader = None;
        let took_over = wait_until(Duration::from_secs(10), || {
            let owner = rt.block_on(holder(&q));
            let pid = owner.as_deref().and_then(pid_of);
            leader = fleet.iter().position(|s| s.pid() == pid && pid.is_some());
            leader.is_some() && rt.block_on(q.stat("admitted")) > before
        });
        assert!(took_over, "round {round}: no live scheduler admitted");
        // Land the crash anywhere in a tick.
        std::thread::sleep(Duration::from_millis(rng.next() % 60));
        let mut victim = fleet.remove(leader.unwrap());
        victim.kill();
        fleet.push(b.clone().start());
    }
    let kill_phase = started.elapsed();
    // Let the last holder admit a little, then stop everything.
    let before = rt.block_on(q.stat("admitted"));
    assert!(wait_until(Duration::from_secs(10), || rt
        .block_on(q.stat("admitted"))
        > before));
    stop.store(true, Ordering::Relaxed);
    let users = rt.block_on(stream).unwrap();
    for s in &mut fleet {
        s.sigterm();
        assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0), "{}", s.log());
    }

    let peak = max_active.load(Ordering::Relaxed);
    assert!(peak <= settings.max_active, "active peaked at {peak}");
    rt.block_on(async {
        q.assert_conserved().await;
        assert_every_user_accounted(&q, users).await;
    });
    let admitted = rt.block_on(q.stat("admitted"));
    eprintln!(
        "{kills} kills in {kill_phase:?}: {users} entered, {admitted} admitted, \
         {} abandoned, {} expired, active peak {peak}/{}",
        rt.block_on(q.stat("abandoned")),
        rt.block_on(q.stat("expired")),
        settings.max_active
    );
    assert!(admitted > 0 && rt.block_on(q.stat("abandoned")) > 0);
}

#[test]
fn three_schedulers_admit_at_one_times_the_rate_and_never_over_the_cap() {
    let _serial = serial();
    let rt = runtime();
    let redis = RedisServer::start();
    let settings = Settings {
        admit_rate_per_second: 100.0,
        max_active: 150,
        token_ttl_ms: 1_000,
        activation_jitter_ms: 0,
        abandon_after_ms: 600_000,
        ..Settings::default()
    };
    let q = queue(&rt, &redis, "trio", settings.clone());
    let b = builder(&redis, "trio", &settings);
    let fleet: Vec<Scheduler> = (0..3).map(|_| b.clone().start()).collect();
    rt.block_on(fill(&q, 0, 3_000));
    let stop = Arc::new(AtomicBool::new(false));
    let max_active = watch_active(&rt, &q, stop.clone());

    // Measure after a second of warm-up, over four seconds.
    std::thread::sleep(Duration::from_secs(1));
    let (t0, a0) = (Instant::now(), rt.block_on(q.stat("admitted")));
    std::thread::sleep(Duration::from_secs(4));
    let (t1, a1) = (Instant::now(), rt.block_on(q.stat("admitted")));
    stop.store(true, Ordering::Relaxed);

    let realized = (a1 - a0) as f64 / (t1 - t0).as_secs_f64();
    let ratio = realized / settings.admit_rate_per_second;
    eprintln!("three schedulers: {realized:.1}/s realized, {ratio:.3}× the configured rate");
    assert!(
        (0.8..=1.1).contains(&ratio),
        "realized {ratio:.3}× the rate"
    );
    let leaders: f64 = fleet
        .iter()
        .map(|s| {
            s.metric("queuegate_lease_held{queue=\"trio\"}")
                .unwrap_or(0.0)
        })
        .sum();
    assert_eq!(leaders, 1.0, "exactly one lease holder");
    let peak = max_active.load(Ordering::Relaxed);
    assert!(peak <= settings.max_active, "active peaked at {peak}");
    rt.block_on(q.assert_conserved());
}

#[test]
fn sigterm_releases_the_lease_and_a_standby_admits_within_a_tick() {
    let _serial = serial();
    let rt = runtime();
    let redis = RedisServer::start();
    // A long lease: a hand-over that waited for expiry would take 5 s.
    let settings = Settings {
        admit_rate_per_second: 100.0,
        lease_ttl_ms: 5_000,
        abandon_after_ms: 600_000,
        ..Settings::default()
    };
    let q = queue(&rt, &redis, "term", settings.clone());
    let b = builder(&redis, "term", &settings);
    let mut first = b.clone().start();
    let first_pid = first.pid();
    assert!(wait_until(Duration::from_secs(5), || {
        rt.block_on(holder(&q)).as_deref().and_then(pid_of) == first_pid
    }));
    let standby = b.clone().start();
    rt.block_on(fill(&q, 0, 2_000));

    first.sigterm();
    let sent = Instant::now();
    assert_eq!(
        first.wait_exit(Duration::from_secs(5)),
        Some(0),
        "{}",
        first.log()
    );
    let exited = sent.elapsed();
    assert!(first.log().contains("lease released"), "{}", first.log());
    let admitted_at_exit = rt.block_on(q.stat("admitted"));
    let holder_at_exit = rt.block_on(holder(&q));
    assert!(
        holder_at_exit.as_deref().and_then(pid_of) != first_pid,
        "the stopped scheduler still holds the lease"
    );
    let mut handed_over = None;
    wait_until(Duration::from_secs(5), || {
        let ours = rt.block_on(holder(&q)).as_deref().and_then(pid_of) == standby.pid();
        if ours && rt.block_on(q.stat("admitted")) > admitted_at_exit {
            handed_over = Some(sent.elapsed());
        }
        handed_over.is_some()
    });
    let handed_over = handed_over.expect("the standby never admitted");
    eprintln!("SIGTERM: exit after {exited:?}, standby admitting after {handed_over:?}");
    // One tick (100 ms) plus a generous margin for a busy machine; a lease
    // left to expire would take 5 s.
    assert!(
        handed_over < Duration::from_millis(1_500),
        "{handed_over:?}"
    );
}

#[test]
fn admission_resumes_soon_after_redis_restarts() {
    let _serial = serial();
    let rt = runtime();
    let mut redis = RedisServer::builder().aof(true).start();
    let settings = Settings {
        admit_rate_per_second: 100.0,
        abandon_after_ms: 600_000,
        ..Settings::default()
    };
    let q = queue(&rt, &redis, "phoenix", settings.clone());
    let sched = builder(&redis, "phoenix", &settings).start();
    rt.block_on(fill(&q, 0, 3_000));
    let before = rt.block_on(q.stat("admitted"));
    assert!(wait_until(Duration::from_secs(5), || rt
        .block_on(q.stat("admitted"))
        > before));

    redis.stop();
    assert!(
        wait_until(Duration::from_secs(5), || matches!(
            sched.health(),
            Some((503, _))
        )),
        "health stayed ok with Redis down"
    );
    redis.restart();
    let back = Instant::now();
    // The test's own connection reconnects too; its errors are not ours.
    let q = queue(&rt, &redis, "phoenix", settings);
    let restored = rt.block_on(q.stat("admitted"));
    assert!(restored >= before, "AOF kept the counters");
    let mut resumed = None;
    wait_until(Duration::from_secs(10), || {
        if rt.block_on(q.stat("admitted")) > restored {
            resumed = Some(back.elapsed());
        }
        resumed.is_some()
    });
    let resumed = resumed.expect("admission never resumed");
    eprintln!("Redis restart: admitting again {resumed:?} after Redis answered");
    assert!(resumed < Duration::from_secs(3), "{resumed:?}");
    assert!(wait_until(Duration::from_secs(5), || matches!(
        sched.health(),
        Some((200, _))
    )));
    rt.block_on(q.assert_conserved());
}
