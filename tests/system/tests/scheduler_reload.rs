//! `queuegate-scheduler` reloads its config on SIGHUP: a changed rate takes
//! effect without a lease change; a broken or invalid file is refused with
//! the reason logged and the running config kept.

use std::time::{Duration, Instant};

use queuegate_shared::fields::{config as cf, stats as sf};
use queuegate_shared::Settings;
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::RedisServer;
use redis::AsyncCommands;

const ACQUIRED: &str = "queuegate_lease_acquisitions_total{queue=\"main\"}";

async fn admitted_over(q: &TestQueue, span: Duration) -> f64 {
    let before = q.stat(sf::ADMITTED).await;
    let start = Instant::now();
    tokio::time::sleep(span).await;
    (q.stat(sf::ADMITTED).await - before) as f64 / start.elapsed().as_secs_f64()
}

async fn log_says(s: &Scheduler, text: &str, times: usize) -> bool {
    for _ in 0..50 {
        if s.log().matches(text).count() >= times {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn published_rate(q: &TestQueue) -> Option<f64> {
    let mut conn = q.conn.clone();
    conn.hget(q.keys.config(), cf::ADMIT_RATE_PER_SECOND)
        .await
        .expect("hget")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_applies_a_new_rate_without_a_lease_change_and_refuses_a_bad_file() {
    let redis = RedisServer::start();
    let settings = Settings {
        admit_rate_per_second: 5.0,
        min_admit_rate_per_second: 1.0,
        abandon_after_ms: 300_000,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "main", settings).await;
    for i in 0..600 {
        q.enter(&user(i)).await;
    }
    let sched = Scheduler::builder(&redis.url())
        .queue(
            "main",
            &[
                ("admit_rate_per_second", "5"),
                ("min_admit_rate_per_second", "1"),
                ("abandon_after_ms", "300000"),
            ],
        )
        .start();
    let mut conn = q.conn.clone();
    let owner: String = conn.get(q.keys.lock()).await.expect("lease");
    let slow = admitted_over(&q, Duration::from_secs(3)).await;
    assert!((3.0..=6.5).contains(&slow), "{slow}/s at 5/s");

    // A faster rate, then SIGHUP.
    let path = sched.config_path().to_path_buf();
    let text = std::fs::read_to_string(&path).expect("config");
    let faster = text.replace("admit_rate_per_second = 5", "admit_rate_per_second = 40");
    assert_ne!(faster, text);
    std::fs::write(&path, &faster).expect("rewrite config");
    sched.sighup();
    assert!(
        log_says(&sched, "config reloaded", 1).await,
        "{}",
        sched.log()
    );
    let fast = admitted_over(&q, Duration::from_secs(3)).await;
    assert!(fast >= 25.0, "{fast}/s after the reload to 40/s");
    assert!(
        published_rate(&q).await == Some(40.0),
        "the new rate is published"
    );
    let still: String = conn.get(q.keys.lock()).await.expect("lease");
    assert_eq!(still, owner, "the same lease holder");
    assert_eq!(
        sched.metric(ACQUIRED),
        Some(1.0),
        "the lease was never retaken"
    );
    assert_eq!(
        sched.metric("queuegate_config_admit_rate_per_second{queue=\"main\"}"),
        Some(40.0)
    );

    // A broken file: refused, the reason logged, nothing changes.
    std::fs::write(&path, "this is [not toml").expect("break config");
    sched.sighup();
    assert!(
        log_says(&sched, "config reload refused", 1).await,
        "{}",
        sched.log()
    );
    // An invalid value: refused naming the field.
    std::fs::write(
        &path,
        faster.replace(
            "admit_rate_per_second = 40",
            "admit_rate_per_second = 40\nmax_active = 0",
        ),
    )
    .expect("invalid config");
    sched.sighup();
    assert!(
        log_says(&sched, "config reload refused", 2).await,
        "{}",
        sched.log()
    );
    assert!(sched.log().contains("max_active = 0"), "{}", sched.log());
    // A change that needs a restart: refused too.
    std::fs::write(&path, faster.replace("id = \"main\"", "id = \"other\"")).expect("rename");
    sched.sighup();
    assert!(
        log_says(&sched, "config reload refused", 3).await,
        "{}",
        sched.log()
    );
    assert!(sched.log().contains("needs a restart"), "{}", sched.log());

    let kept = admitted_over(&q, Duration::from_secs(3)).await;
    assert!(kept >= 25.0, "{kept}/s: the running config is kept");
    assert_eq!(published_rate(&q).await, Some(40.0));
    assert_eq!(sched.metric(ACQUIRED), Some(1.0));
    let mut sched = sched;
    assert!(sched.is_running());
}
