//! The scheduler's command line as an operator meets it: exit codes and
//! messages for config mistakes and an unreachable Redis, the queue-state
//! commands, `status`, `/healthz` and `/metrics` of a running scheduler.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use queuegate_shared::ops::{EnterReply, Observed};
use queuegate_shared::{Prefix, QueueId, QueueKeys, QueueState, Settings};
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::scheduler::{self, Scheduler, BIN};
use queuegate_testkit::{free_port, target_bin, wait_until, RedisServer};

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("scheduler.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn config_mistakes_exit_2_naming_the_file_queue_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[queue]]\nid = \"main\"\nmax_active = 0\n",
            "queue \"main\": max_active = 0",
        ),
        (
            "[[queue]]\nid = \"main\"\nmax_activ = 5\n",
            "unknown setting `max_activ`",
        ),
        ("[[queue]]\nid = \"Main\"\n", "[[queue]] #1: id = \"Main\""),
        (
            "[redis]\nurl = \"http://x\"\n[[queue]]\nid = \"a\"\n",
            "[redis] url",
        ),
    ];
    for (body, want) in cases {
        let config = write_config(dir.path(), body);
        for args in [&["run"][..], &["status"][..]] {
            let out = scheduler::command(&config, args);
            let all = text(&out);
            assert_eq!(out.status.code(), Some(2), "{args:?} {body:?}: {all}");
            assert!(all.contains(&config.display().to_string()), "{all}");
            assert!(all.contains(want), "{all}\nwant {want}");
        }
    }
    let missing = dir.path().join("nope.toml");
    let out = scheduler::command(&missing, &["status"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("cannot read"), "{}", text(&out));

    let out = Command::new(target_bin(BIN))
        .arg("frobnicate")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}

#[test]
fn an_unreachable_redis_exits_1_and_env_overrides_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let dead = format!("redis://127.0.0.1:{}", free_port());
    let config = write_config(
        dir.path(),
        &format!("[redis]\nurl = {dead:?}\n[[queue]]\nid = \"main\"\n"),
    );
    let out = scheduler::command(&config, &["status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot reach redis"), "{}", text(&out));

    let redis = RedisServer::start();
    let out = Command::new(target_bin(BIN))
        .arg("--config")
        .arg(&config)
        .arg("status")
        .env("QUEUEGATE_REDIS_URL", redis.url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("unconfigured"), "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_pause_resume_close_drain_and_read_status() {
    let redis = RedisServer::start();
    let sched = Scheduler::builder(&redis.url())
        .queue(
            "main",
            &[("admit_rate_per_second", "50"), ("max_active", "5")],
        )
        .start();
    let settings = Settings {
        admit_rate_per_second: 50.0,
        max_active: 5,
        ..Settings::default()
    };
    let q = TestQueue {
        keys: QueueKeys::new(&Prefix::default(), &QueueId::new("main").unwrap()),
        settings,
        conn: redis::Client::open(redis.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap(),
    };
    let cli = |args: &[&str]| scheduler::command(sched.config_path(), args);
    let state = || async {
        let mut conn = q.conn.clone();
        let s: Option<String> = redis::cmd("HGET")
            .arg(q.keys.config())
            .arg("state")
            .query_async(&mut conn)
            .await
            .unwrap();
        s.and_then(|s| QueueState::parse(&s))
    };

    let out = cli(&["pause"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("queue main: paused (was open)"),
        "{}",
        text(&out)
    );
    assert_eq!(state().await, Some(QueueState::Paused));
    for i in 0..8 {
        assert!(matches!(q.enter(&user(i)).await, EnterReply::Entered(_)));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(q.stat("admitted").await, 0, "a paused queue admits nobody");

    let out = cli(&["resume", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    let admitted_five = tokio::task::block_in_place(|| {
        let rt = tokio::runtime::Handle::current();
        wait_until(Duration::from_secs(5), || {
            rt.block_on(q.stat("admitted")) == 5
        })
    });
    assert!(admitted_five, "resume admits up to the 5 slots");

    let out = cli(&["status"]);
    let status = text(&out);
    assert!(out.status.success(), "{status}");
    let pid = sched.pid().unwrap().to_string();
    for want in [
        "queue main",
        "state       open",
        "waiting     3",
        "active      5 / 5",
        &format!("/{pid}/"),
    ] {
        assert!(status.contains(want), "{want:?} missing:\n{status}");
    }
    let out = cli(&["status", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["waiting"], 3, "{json}");

    let out = cli(&["close", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(matches!(
        q.enter(&user(100)).await,
        EnterReply::Closed(Some(QueueState::Closed))
    ));
    let out = cli(&["resume", "main"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("use `open`"), "{}", text(&out));
    let out = cli(&["drain", "main"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(matches!(
        q.enter(&user(101)).await,
        EnterReply::Closed(Some(QueueState::Draining))
    ));
    let out = cli(&["open", "main"]);
    assert!(text(&out).contains("open (was draining)"), "{}", text(&out));
    assert!(matches!(q.enter(&user(102)).await, EnterReply::Entered(_)));
    let out = cli(&["pause", "other"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // What the service exports.
    let (code, body) = sched.health().unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"lease\":\"held\""), "{body}");
    let metrics = sched.metrics();
    for want in [
        "queuegate_admitted_total{queue=\"main\"} 5",
        "queuegate_active_slots{queue=\"main\"} 5",
        "queuegate_lease_held{queue=\"main\"} 1",
        "queuegate_tick_duration_seconds_count{queue=\"main\"}",
        "queuegate_waiting{queue=\"main\"}",
    ] {
        assert!(metrics.contains(want), "{want:?} missing:\n{metrics}");
    }
    assert!(matches!(q.position(&user(7)).await, Observed::Waiting(_)));
    q.assert_conserved().await;
}

#[test]
fn a_starting_scheduler_caches_every_script_for_the_edge() {
    let redis = RedisServer::start();
    let _scheduler = Scheduler::builder(&redis.url()).queue("main", &[]).start();
    for script in queuegate_shared::script::all() {
        let reply = redis
            .raw_command(&format!("SCRIPT EXISTS {}", script.sha1()))
            .unwrap();
        assert_eq!(reply, "*1\r\n:1\r\n", "{} is not cached", script.name());
    }
}

#[test]
fn the_scheduler_runs_from_the_environment_alone_and_never_mixes_it_with_a_file() {
    let redis = RedisServer::start();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("scheduler.log");
    let mut child = Command::new(target_bin(BIN))
        .arg("run")
        .current_dir(dir.path())
        .env_remove("QUEUEGATE_CONFIG")
        .env("QUEUEGATE_REDIS_URL", redis.url())
        .env("QUEUEGATE_LISTEN", format!("127.0.0.1:{port}"))
        .env("QUEUEGATE_QUEUE", "envq")
        .env("QUEUEGATE_MAX_ACTIVE", "7")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the scheduler");
    let healthy = wait_until(Duration::from_secs(15), || {
        std::net::TcpStream::connect(("127.0.0.1", port))
            .ok()
            .and_then(|mut s| {
                use std::io::{Read, Write};
                s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").ok()?;
                let mut reply = String::new();
                s.read_to_string(&mut reply).ok()?;
                Some(reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"))
            })
            .unwrap_or(false)
    });
    let published = wait_until(Duration::from_secs(10), || {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("envq").unwrap());
        let mut conn = redis::Client::open(redis.url())
            .unwrap()
            .get_connection()
            .unwrap();
        let max: Option<String> = redis::cmd("HGET")
            .arg(keys.config())
            .arg("max_active")
            .query(&mut conn)
            .unwrap_or(None);
        max.as_deref() == Some("7")
    });
    // A container's health check: the same environment, no curl.
    let env_only = |cmd: &mut Command| {
        cmd.current_dir(dir.path())
            .env_remove("QUEUEGATE_CONFIG")
            .env("QUEUEGATE_REDIS_URL", redis.url())
            .env("QUEUEGATE_LISTEN", format!("127.0.0.1:{port}"))
            .env("QUEUEGATE_QUEUE", "envq");
    };
    let mut check = Command::new(target_bin(BIN));
    check.arg("healthcheck");
    env_only(&mut check);
    let checked = check.output().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(healthy, "/healthz never answered 200: {logged}");
    assert!(
        published,
        "queue envq's settings from the environment: {logged}"
    );
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    let mut check = Command::new(target_bin(BIN));
    check.arg("healthcheck");
    env_only(&mut check);
    let down = check.output().unwrap();
    assert_eq!(
        down.status.code(),
        Some(1),
        "nothing listens: {}",
        text(&down)
    );

    // Beside a file, a queue setting in the environment would be ignored:
    // refused, naming the variable.
    let config = write_config(
        dir.path(),
        &format!(
            "[redis]\nurl = {:?}\n[[queue]]\nid = \"main\"\n",
            redis.url()
        ),
    );
    let out = Command::new(target_bin(BIN))
        .arg("--config")
        .arg(&config)
        .arg("status")
        .env("QUEUEGATE_MAX_ACTIVE", "7")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("QUEUEGATE_MAX_ACTIVE"),
        "{}",
        text(&out)
    );

    // Neither a file nor Redis in the environment: a usage error that says
    // how to configure (unless this machine has the default file).
    if !Path::new("/etc/queuegate/scheduler.toml").exists() {
        let out = Command::new(target_bin(BIN))
            .arg("status")
            .env_remove("QUEUEGATE_CONFIG")
            .env_remove("QUEUEGATE_REDIS_URL")
            .env_remove("QUEUEGATE_REDIS_NODES")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("QUEUEGATE_REDIS_URL"), "{}", text(&out));
    }
}

#[test]
fn the_example_config_names_every_setting_at_its_default() {
    let path = queuegate_testkit::repo_root().join("deploy/scheduler.example.toml");
    let example = std::fs::read_to_string(&path).expect("deploy/scheduler.example.toml");
    let doc: toml::Table = toml::from_str(&example).expect("TOML");
    let defaults = doc["defaults"].as_table().expect("[defaults]").clone();
    let mut named: Vec<String> = defaults.keys().cloned().collect();
    named.sort_unstable();
    assert_eq!(
        named,
        Settings::field_names(),
        "every setting, and only settings"
    );
    let parsed: Settings = toml::Value::Table(defaults).try_into().expect("settings");
    assert_eq!(parsed, Settings::default(), "each at its default");
    // And it is a config the scheduler takes as it is.
    let out = scheduler::command(&path, &["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

/// Issue #37: the environment is as strict as a file. A misspelt variable
/// was ignored (`QUEUEGATE_ADMIT_RATE=50`: `check` said ok and the queue
/// ran at 175/s); now it is refused with the name it likely meant. A secret
/// may come from a file (`*_FILE`), never both ways, and is never shown.
#[test]
fn misspelt_variables_are_refused_and_secrets_come_from_files() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let env_only = |args: &[&str], vars: &[(&str, String)]| {
        let mut cmd = Command::new(target_bin(BIN));
        cmd.args(args)
            .current_dir(dir.path())
            .env_remove("QUEUEGATE_CONFIG")
            .env("QUEUEGATE_REDIS_URL", redis.url());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };

    let out = env_only(&["check"], &[("QUEUEGATE_ADMIT_RATE", "50".into())]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("QUEUEGATE_ADMIT_RATE:")
            && text(&out).contains("did you mean QUEUEGATE_ADMIT_RATE_PER_SECOND?"),
        "{}",
        text(&out)
    );
    let out = env_only(&["run"], &[("QUEUEGATE_ADMIT_RATE", "50".into())]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "run refuses too: {}",
        text(&out)
    );
    // Beside a file as well.
    let config = write_config(
        dir.path(),
        &format!(
            "[redis]\nurl = {:?}\n[[queue]]\nid = \"main\"\n",
            redis.url()
        ),
    );
    let out = Command::new(target_bin(BIN))
        .arg("--config")
        .arg(&config)
        .arg("check")
        .env("QUEUEGATE_REDIS_PASWORD", "x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("did you mean QUEUEGATE_REDIS_PASSWORD?"),
        "{}",
        text(&out)
    );

    // A password from a file reaches a Redis that needs it, and is never shown.
    let secret = "pw-f1le-s3cret";
    redis
        .raw_command(&format!("CONFIG SET requirepass {secret}"))
        .unwrap();
    let pw_file = dir.path().join("redis-password");
    std::fs::write(&pw_file, format!("{secret}\n")).unwrap();
    let pw_path = pw_file.display().to_string();
    let out = env_only(&["status"], &[]);
    assert_eq!(out.status.code(), Some(1), "no password: {}", text(&out));
    let out = env_only(
        &["status"],
        &[("QUEUEGATE_REDIS_PASSWORD_FILE", pw_path.clone())],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains(secret), "{}", text(&out));
    let out = env_only(
        &["status"],
        &[
            ("QUEUEGATE_REDIS_PASSWORD_FILE", pw_path.clone()),
            ("QUEUEGATE_REDIS_PASSWORD", secret.into()),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("QUEUEGATE_REDIS_PASSWORD_FILE are both set")
            && !text(&out).contains(secret),
        "{}",
        text(&out)
    );

    // The admin API's tokens from a file: the running scheduler takes them.
    let token = "qga_from_a_file";
    let tokens_file = dir.path().join("admin-tokens");
    std::fs::write(
        &tokens_file,
        format!("ops={}\n", queuegate_scheduler::config::token_hash(token)),
    )
    .unwrap();
    let (port, admin_port) = (free_port(), free_port());
    let log = dir.path().join("scheduler.log");
    let mut child = Command::new(target_bin(BIN))
        .arg("run")
        .current_dir(dir.path())
        .env_remove("QUEUEGATE_CONFIG")
        .env("QUEUEGATE_REDIS_URL", redis.url())
        .env("QUEUEGATE_REDIS_PASSWORD_FILE", &pw_path)
        .env("QUEUEGATE_LISTEN", format!("127.0.0.1:{port}"))
        .env("QUEUEGATE_ADMIN_LISTEN", format!("127.0.0.1:{admin_port}"))
        .env("QUEUEGATE_ADMIN_TOKENS_FILE", &tokens_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the scheduler");
    let ask = |bearer: &str| -> Option<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", admin_port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(3))).ok()?;
        let req =
            format!("GET /admin/v1/queues HTTP/1.0\r\nAuthorization: Bearer {bearer}\r\n\r\n");
        s.write_all(req.as_bytes()).ok()?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).ok()?;
        Some(reply)
    };
    let mut answered = None;
    wait_until(Duration::from_secs(15), || {
        answered = ask(token);
        answered.is_some()
    });
    let refused = ask("qga_wrong");
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let answered = answered.unwrap_or_default();
    assert!(answered.contains(" 200 "), "{answered}\n{logged}");
    assert!(refused.unwrap_or_default().contains(" 401 "), "{logged}");
    assert!(
        !logged.contains(secret) && !logged.contains(token),
        "{logged}"
    );
}
