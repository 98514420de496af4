//! `queuegate-scheduler` reloads its config on SIGHUP: a changed rate takes
//! effect without a lease change; a broken or invalid file is refused with
//! the reason logged and the running config kept; a queue added to the
//! file starts and one removed stops, without a restart.

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
    std::fs::write(
        &path,
        faster.replace("[redis]\n", "[redis]\nresponse_timeout_ms = 700\n"),
    )
    .expect("change [redis]");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_starts_an_added_queue_and_stops_a_removed_one_without_a_restart() {
    use queuegate_scheduler::config::token_hash;
    const TOKEN: &str = "qga_99887766554433221100ffeeddccbbaa-ops";
    let redis = RedisServer::start();
    let hash = token_hash(TOKEN);
    let mut sched = Scheduler::builder(&redis.url())
        .queue("main", &[])
        .admin_tokens(&[("ops", &hash)])
        .start();
    let held = |s: &Scheduler, queue: &str| {
        s.metric(&format!("queuegate_lease_held{{queue=\"{queue}\"}}")) == Some(1.0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !held(&sched, "main") {
        assert!(
            Instant::now() < deadline,
            "main never held: {}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let drop = TestQueue::open(&redis.url(), "drop-1", Settings::default()).await;
    let mut conn = drop.conn.clone();
    let _: () = conn.del(drop.keys.config()).await.expect("del");

    // Added: started and published, served by the admin API too.
    let path = sched.config_path().to_path_buf();
    let text = std::fs::read_to_string(&path).expect("config");
    std::fs::write(
        &path,
        format!("{text}\n[[queue]]\nid = \"drop-1\"\nmax_active = 7\n"),
    )
    .expect("add a queue");
    sched.sighup();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !held(&sched, "drop-1") {
        assert!(
            Instant::now() < deadline,
            "drop-1 never held: {}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        drop.config_field(cf::MAX_ACTIVE).await,
        "7",
        "its settings published"
    );
    assert!(
        sched.log().contains("queue added to the config"),
        "{}",
        sched.log()
    );
    let admin = sched.admin_url().expect("admin API");
    let resp = reqwest::Client::new()
        .get(format!("{admin}/admin/v1/queues/drop-1"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("admin API");
    assert_eq!(
        resp.status().as_u16(),
        200,
        "the admin API knows the new queue"
    );
    assert!(sched.is_running());
    assert_eq!(
        sched.metric(ACQUIRED),
        Some(1.0),
        "main's lease was never retaken"
    );

    // Removed: it finishes its tick and releases its lease; the rest runs on.
    let main = TestQueue::open(&redis.url(), "main", Settings::default()).await;
    std::fs::write(
        &path,
        format!(
            "{}\n[[queue]]\nid = \"drop-1\"\nmax_active = 7\n",
            text.split("[[queue]]").next().unwrap_or_default()
        ),
    )
    .expect("remove a queue");
    sched.sighup();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = main.conn.clone();
        let lock: Option<String> = c.get(main.keys.lock()).await.expect("get lock");
        if lock.is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "main's lease never released: {}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held(&sched, "drop-1"));
    let health = reqwest::get(format!("http://127.0.0.1:{}/healthz", sched.port()))
        .await
        .expect("healthz");
    assert_eq!(
        health.status().as_u16(),
        200,
        "a removed queue leaves /healthz"
    );
    assert!(sched.is_running());
}
