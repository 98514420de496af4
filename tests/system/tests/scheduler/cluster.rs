//! The scheduler unchanged on a Redis Cluster: a local 3-node cluster
//! (free ports, no replicas), queues chosen so their hash tags land on
//! different nodes, all admitted by one scheduler process.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use queuegate_scheduler::engine;
use queuegate_shared::ops::{Enter, EnterReply};
use queuegate_shared::{Prefix, QueueId, QueueKeys};
use queuegate_system_tests::user;
use queuegate_testkit::scheduler::{self, SchedulerBuilder};
use queuegate_testkit::{wait_until, RedisServer};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;

fn start_cluster() -> Vec<RedisServer> {
    let nodes: Vec<RedisServer> = (0..3)
        .map(|_| {
            RedisServer::builder()
                .arg("--cluster-enabled")
                .arg("yes")
                .arg("--cluster-config-file")
                .arg("nodes.conf")
                .arg("--cluster-node-timeout")
                .arg("2000")
                .start()
        })
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .arg("create")
        .args(&addrs)
        .args(["--cluster-replicas", "0", "--cluster-yes"])
        .output()
        .expect("run redis-cli --cluster create");
    assert!(
        out.status.success(),
        "cluster create failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let ok = wait_until(Duration::from_secs(20), || {
        nodes.iter().all(|n| {
            n.raw_command("CLUSTER INFO")
                .is_ok_and(|r| r.contains("cluster_state:ok"))
        })
    });
    assert!(ok, "cluster never reached cluster_state:ok");
    nodes
}

/// The node (index) that serves the slot of hash tag `{tag}`: the others
/// answer MOVED.
fn owner_of(nodes: &[RedisServer], tag: &str) -> Option<usize> {
    nodes.iter().position(|n| {
        n.raw_command(&format!("EXISTS qg:{{{tag}}}:probe"))
            .is_ok_and(|r| r.starts_with(':'))
    })
}

/// One queue per node: ids `c0`, `c1`, … until every node has one.
fn queues_on_every_node(nodes: &[RedisServer]) -> Vec<(String, usize)> {
    let mut picked: Vec<(String, usize)> = Vec::new();
    for i in 0..200 {
        let id = format!("c{i}");
        if let Some(node) = owner_of(nodes, &id) {
            if !picked.iter().any(|(_, n)| *n == node) {
                picked.push((id, node));
            }
        }
        if picked.len() == nodes.len() {
            return picked;
        }
    }
    panic!("no queue ids found for every node: {picked:?}");
}

async fn cluster_conn(urls: &[String]) -> ClusterConnection {
    ClusterClient::new(urls.to_vec())
        .expect("cluster client")
        .get_async_connection()
        .await
        .expect("connect to the cluster")
}

async fn stat(conn: &mut ClusterConnection, keys: &QueueKeys, field: &str) -> i64 {
    let v: Option<i64> = redis::cmd("HGET")
        .arg(keys.stats())
        .arg(field)
        .query_async(conn)
        .await
        .expect("HGET stats");
    v.unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_scheduler_admits_queues_on_every_node_of_a_cluster() {
    let nodes = start_cluster();
    let urls: Vec<String> = nodes.iter().map(RedisServer::url).collect();
    let queues = queues_on_every_node(&nodes);
    let distinct: BTreeSet<usize> = queues.iter().map(|(_, n)| *n).collect();
    assert_eq!(distinct.len(), 3, "{queues:?}");

    let mut b = SchedulerBuilder::cluster(&urls);
    for (id, _) in &queues {
        b = b.queue(
            id,
            &[("admit_rate_per_second", "200"), ("max_active", "50")],
        );
    }
    let sched = b.start();

    let mut conn = cluster_conn(&urls).await;
    let per_queue = 40;
    let all_keys: Vec<QueueKeys> = queues
        .iter()
        .map(|(id, _)| QueueKeys::new(&Prefix::default(), &QueueId::new(id).unwrap()))
        .collect();
    for keys in &all_keys {
        for i in 0..per_queue {
            let reply = engine::run(
                &mut conn,
                &Enter {
                    keys,
                    user: &user(i),
                    guard: queuegate_shared::guard::EntryGuard::default(),
                    token: None,
                },
            )
            .await
            .unwrap();
            assert!(matches!(reply, EnterReply::Entered(_)), "{reply:?}");
        }
    }

    // Every queue is admitted up to its slot cap, on its own node.
    for keys in &all_keys {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let admitted = stat(&mut conn, keys, "admitted").await;
            if admitted == per_queue as i64 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: admitted {admitted} of {per_queue}",
                keys.queue()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    for ((id, node), keys) in queues.iter().zip(&all_keys) {
        let reply = nodes[*node]
            .raw_command(&format!("HGET {} admitted", keys.stats()))
            .unwrap();
        assert!(reply.contains("40"), "{id} on node {node}: {reply:?}");
    }

    // The operator view works on the cluster too.
    let out = scheduler::command(sched.config_path(), &["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (id, _) in &queues {
        assert!(text.contains(&format!("queue {id}\n")), "{text}");
    }
    assert!(text.contains("active      40 / 50"), "{text}");
}
