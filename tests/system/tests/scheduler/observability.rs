//! The operator kit against a running scheduler: every metric the Grafana
//! dashboard and the Prometheus alert rules in `deploy/` name is exported
//! by a real `queuegate-scheduler` admitting a real line.

use std::collections::BTreeSet;
use std::time::Duration;

use queuegate_shared::ops::{ConsumeReply, EnterReply, Outcome, Stock, StockChange, StockReply};
use queuegate_shared::Settings;
use queuegate_system_tests::{redis_cmd, user, TestQueue};
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::{repo_root, wait_until, RedisServer};

/// The files whose metric names must exist.
const USERS: [&str; 2] = [
    "deploy/grafana/queuegate.json",
    "deploy/prometheus/alerts.yml",
];

/// Orders settled before the scrape: more than origin control's default
/// minimum of 20 answers per window.
const ORDERS: usize = 30;

/// Every `queuegate_…` name in a file (expressions, legends, descriptions).
fn names_in(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("queuegate_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// The sample names of a text exposition (`name{labels} value` lines).
fn exported(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

/// The names `USERS` need that `metrics` lacks, with the file naming each.
fn missing(metrics: &str) -> Vec<String> {
    let have = exported(metrics);
    let mut gaps = Vec::new();
    for file in USERS {
        let text = std::fs::read_to_string(repo_root().join(file)).expect("read deploy file");
        let wanted = names_in(&text);
        assert!(wanted.len() > 5, "{file} names only {wanted:?}");
        gaps.extend(
            wanted
                .into_iter()
                .filter(|n| !have.contains(n))
                .map(|n| format!("{n} (in {file})")),
        );
    }
    gaps
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_use_is_exported() {
    let redis = RedisServer::start();
    // A slow rate keeps a line waiting for seconds, long enough for the
    // measured rate (reported after 1 s) to appear.
    let settings = Settings {
        admit_rate_per_second: 20.0,
        ..Settings::default()
    };
    let sched = Scheduler::builder(&redis.url())
        .queue("main", &[("admit_rate_per_second", "20")])
        .start();
    let held = wait_until(Duration::from_secs(10), || {
        sched.metric("queuegate_lease_held{queue=\"main\"}") == Some(1.0)
    });
    assert!(held, "the scheduler never took the lease:\n{}", sched.log());

    let q = TestQueue::open(&redis.url(), "main", settings).await;
    // A kept stock: its series exist only while one is (no series: none
    // kept), and the orders below sell from it.
    let stock = q
        .run(&Stock {
            keys: &q.keys,
            change: StockChange::Set(1_000),
        })
        .await
        .expect("stock");
    assert!(matches!(stock, StockReply::Done(_)), "{stock:?}");
    for i in 0..200 {
        assert!(matches!(q.enter(&user(i)).await, EnterReply::Entered(_)));
    }

    // Orders settled through the edge's script give origin control its
    // samples: its error share and p95 exist only once answers do.
    let mut settled = BTreeSet::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while settled.len() < ORDERS && std::time::Instant::now() < deadline {
        for i in 0..200 {
            let u = user(i);
            if settled.contains(&i) {
                continue;
            }
            let Some(token) = q.token_of(&u).await else {
                continue;
            };
            if q.consume(&u, &token).await == ConsumeReply::Accepted {
                q.settle(&u, &token, Outcome::Success).await;
                settled.insert(i);
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        settled.len() >= ORDERS,
        "only {} orders settled in 20 s:\n{}",
        settled.len(),
        sched.log()
    );

    let mut gaps = Vec::new();
    let complete = wait_until(Duration::from_secs(15), || {
        gaps = missing(&sched.metrics());
        gaps.is_empty()
    });
    assert!(
        complete,
        "exported by no running scheduler: {gaps:#?}\n/metrics:\n{}",
        sched.metrics()
    );
    let version = format!(
        "queuegate_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    assert!(sched.metrics().contains(&version), "{}", sched.metrics());
    q.assert_conserved().await;
}

#[test]
fn the_name_scanner_finds_names_and_ignores_lookalikes() {
    let text = r#"rate(queuegate_admitted_total{queue=~"$q"}[5m]) / queuegate-scheduler queuegate.json queuegate_x9"#;
    let names: Vec<String> = names_in(text).into_iter().collect();
    assert_eq!(names, ["queuegate_admitted_total", "queuegate_x9"]);
    let metrics =
        "# TYPE queuegate_waiting gauge\nqueuegate_waiting{queue=\"a\"} 3\nqueuegate_up 1\n# EOF\n";
    let have: Vec<String> = exported(metrics).into_iter().collect();
    assert_eq!(have, ["queuegate_up", "queuegate_waiting"]);
}

/// Grafana provisions a dashboard from a file as it is (no import step to
/// fill `${DS_…}` inputs): the data source is a template variable.
#[test]
fn the_dashboard_is_provisionable_from_its_file() {
    let path = queuegate_testkit::repo_root().join("deploy/grafana/queuegate.json");
    let text = std::fs::read_to_string(&path).expect("the dashboard");
    let d: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    assert!(!text.contains("${DS_"), "no import-time placeholder");
    assert!(d.get("__inputs").is_none(), "no import-time inputs");
    let vars = d["templating"]["list"]
        .as_array()
        .expect("template variables");
    assert!(
        vars.iter().any(|v| v["name"] == "datasource"
            && v["type"] == "datasource"
            && v["query"] == "prometheus"),
        "a Prometheus data source variable"
    );
    // Every data source reference goes through the variable.
    fn refs<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, child) in m {
                    if k == "datasource" && child.is_object() {
                        out.push(child);
                    }
                    refs(child, out);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|c| refs(c, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    refs(&d, &mut found);
    assert!(found.len() > 10, "{} data source references", found.len());
    for r in found {
        assert_eq!(r["uid"], "${datasource}", "{r}");
    }
    let mut ids: Vec<u64> = d["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .map(|p| p["id"].as_u64().expect("a panel id"))
        .collect();
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "panel ids are unique");
    // The provider file beside it names the folder the dashboard is in.
    let provider = std::fs::read_to_string(
        queuegate_testkit::repo_root().join("deploy/grafana/provisioning.yaml"),
    )
    .expect("deploy/grafana/provisioning.yaml");
    assert!(
        provider.contains("type: file") && provider.contains("apiVersion: 1"),
        "{provider}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_refusal_is_counted_by_its_kind_and_logged_with_what_to_fix() {
    // A fail-over left the scheduler's address on a read-only replica:
    // every tick is refused with READONLY until the operator points it
    // back (here: the replica becomes a primary again).
    let redis = RedisServer::start();
    let sched = Scheduler::builder(&redis.url())
        .queue("main", &[("admit_rate_per_second", "20")])
        .start();
    let held = wait_until(Duration::from_secs(10), || {
        sched.metric("queuegate_lease_held{queue=\"main\"}") == Some(1.0)
    });
    assert!(held, "the scheduler never took the lease:\n{}", sched.log());
    let readonly = "queuegate_redis_errors_total{queue=\"main\",kind=\"readonly\"}";
    assert_eq!(sched.metric(readonly), None, "no refusal yet");
    let connection = "queuegate_redis_errors_total{queue=\"main\",kind=\"connection\"}";
    assert_eq!(
        sched.metric(connection),
        Some(0.0),
        "the series exists from the start"
    );

    redis_cmd(&redis.url(), &["REPLICAOF", "127.0.0.1", "1"]).expect("replicaof");
    let counted = wait_until(Duration::from_secs(10), || {
        sched.metric(readonly).is_some_and(|n| n >= 1.0)
    });
    redis_cmd(&redis.url(), &["REPLICAOF", "NO", "ONE"]).expect("replicaof no one");
    assert!(counted, "no readonly refusal counted:\n{}", sched.metrics());
    let log = sched.log();
    assert!(
        log.contains("Redis refused the tick") && log.contains("point it at the new primary"),
        "{log}"
    );

    // Redis is a primary again: the ticks go through and the count stops.
    let q = TestQueue::open(&redis.url(), "main", Settings::default()).await;
    assert!(matches!(q.enter(&user(1)).await, EnterReply::Entered(_)));
    let admitted = wait_until(Duration::from_secs(10), || {
        sched
            .metric("queuegate_admitted_total{queue=\"main\"}")
            .is_some_and(|n| n >= 1.0)
    });
    assert!(
        admitted,
        "no admission after the refusals:\n{}",
        sched.log()
    );
    let after = sched.metric(readonly);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sched.metric(readonly), after, "refusals went on");
}
