//! The `queuegate-scheduler` as a real process: a temp TOML config, a free
//! port for `/healthz` and `/metrics`, readiness polled, and kill / SIGTERM
//! helpers for fault tests.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use queuegate_shared::Settings;
use tempfile::TempDir;

use crate::paths::target_bin;
use crate::process::{free_port, http_get, wait_until, Process};
use crate::LOOPBACK;

/// `settings` as a queue's config lines (name, TOML value), only where they
/// differ from the defaults.
pub fn settings_lines(settings: &Settings) -> Vec<(String, String)> {
    let defaults = Settings::default().to_fields();
    settings
        .to_fields()
        .into_iter()
        .filter(|field| !defaults.contains(field))
        .collect()
}

/// The binary's name in the target folder.
pub const BIN: &str = "queuegate-scheduler";

/// Options for [`Scheduler`]: Redis, queues and their settings.
#[derive(Debug, Clone)]
pub struct SchedulerBuilder {
    redis: Vec<(String, String)>,
    queues: Vec<(String, Vec<(String, String)>)>,
    env: Vec<(String, String)>,
    admin: Vec<(String, String)>,
    sections: Vec<String>,
}

impl SchedulerBuilder {
    /// A scheduler for the server at `url` (`redis://127.0.0.1:PORT`).
    pub fn new(url: &str) -> Self {
        SchedulerBuilder {
            redis: vec![("url".into(), format!("{url:?}"))],
            queues: Vec::new(),
            env: vec![("RUST_LOG".into(), "info".into())],
            admin: Vec::new(),
            sections: Vec::new(),
        }
    }

    /// A scheduler for a Redis Cluster with these seed nodes.
    pub fn cluster(nodes: &[String]) -> Self {
        let list: Vec<String> = nodes.iter().map(|n| format!("{n:?}")).collect();
        SchedulerBuilder {
            redis: vec![("nodes".into(), format!("[{}]", list.join(", ")))],
            queues: Vec::new(),
            env: vec![("RUST_LOG".into(), "info".into())],
            admin: Vec::new(),
            sections: Vec::new(),
        }
    }

    /// A `[redis]` key with its TOML value, e.g. `("response_timeout_ms", "200")`.
    pub fn redis_option(mut self, key: &str, toml_value: &str) -> Self {
        self.redis.push((key.into(), toml_value.into()));
        self
    }

    /// A `[[queue]]` with settings as TOML values, e.g. `[("max_active", "10")]`.
    pub fn queue(mut self, id: &str, settings: &[(&str, &str)]) -> Self {
        self.queues.push((
            id.into(),
            settings
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ));
        self
    }

    /// A `[[queue]]` with `settings`: the lines of its config are the
    /// settings that differ from [`Settings::default`], so a test states
    /// its settings as the typed struct the scheduler validates.
    pub fn queue_settings(self, id: &str, settings: &Settings) -> Self {
        let lines = settings_lines(settings);
        let pairs: Vec<(&str, &str)> = lines
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.queue(id, &pairs)
    }

    /// Turns the admin API on with these tokens: (name, `sha256:<hex>` of
    /// the token), on a free loopback port of its own.
    pub fn admin_tokens(mut self, tokens: &[(&str, &str)]) -> Self {
        self.admin = tokens
            .iter()
            .map(|(n, h)| (n.to_string(), h.to_string()))
            .collect();
        self
    }

    /// A section of the config as TOML text, e.g. `[beacon]` and its keys.
    pub fn section(mut self, toml: &str) -> Self {
        self.sections.push(toml.into());
        self
    }

    /// An environment variable for the process.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The config file text, listening on `port` (and the admin API on
    /// `admin_port` when it has tokens).
    pub fn config_text(&self, port: u16, admin_port: u16) -> String {
        let mut t = String::from("[redis]\n");
        for (k, v) in &self.redis {
            t.push_str(&format!("{k} = {v}\n"));
        }
        t.push_str(&format!("\n[http]\nlisten = \"{LOOPBACK}:{port}\"\n"));
        if !self.admin.is_empty() {
            t.push_str(&format!(
                "\n[admin]\nlisten = \"{LOOPBACK}:{admin_port}\"\n[admin.tokens]\n"
            ));
            for (name, hash) in &self.admin {
                t.push_str(&format!("{name:?} = {hash:?}\n"));
            }
        }
        for section in &self.sections {
            t.push_str(&format!("\n{section}\n"));
        }
        for (id, settings) in &self.queues {
            t.push_str(&format!("\n[[queue]]\nid = {id:?}\n"));
            for (k, v) in settings {
                t.push_str(&format!("{k} = {v}\n"));
            }
        }
        t
    }

    /// Starts the scheduler and waits until `/healthz` answers 200 (every
    /// queue reached Redis).
    pub fn start(self) -> Scheduler {
        self.launch(true)
    }

    /// Starts the scheduler and waits only until its HTTP listener answers
    /// (Redis may be down).
    pub fn spawn(self) -> Scheduler {
        self.launch(false)
    }

    fn launch(self, healthy: bool) -> Scheduler {
        let dir = tempfile::Builder::new()
            .prefix("qg-scheduler-")
            .tempdir()
            .expect("temp dir for the scheduler");
        // Another process may take the port between probe and bind: retry.
        for attempt in 0..5 {
            let port = free_port();
            let admin_port = free_port();
            let config = dir.path().join("scheduler.toml");
            std::fs::write(&config, self.config_text(port, admin_port))
                .expect("write scheduler.toml");
            let mut cmd = Command::new(target_bin(BIN));
            cmd.arg("--config").arg(&config).arg("run");
            for (k, v) in &self.env {
                cmd.env(k, v);
            }
            let log = dir.path().join(format!("scheduler-{attempt}.log"));
            let mut process = Process::spawn(BIN, cmd, &log);
            let up = wait_until(Duration::from_secs(15), || {
                if !process.is_running() {
                    return true;
                }
                match http_get(port, "/healthz") {
                    Some((status, _)) => (!healthy || status == 200) && process.listens_on(port),
                    None => false,
                }
            });
            if up && process.is_running() {
                return Scheduler {
                    port,
                    admin_port: (!self.admin.is_empty()).then_some(admin_port),
                    process,
                    config,
                    _dir: dir,
                };
            }
            if !process.log().contains("cannot listen") {
                process.fail("did not become ready within 15 s");
            }
        }
        panic!("{BIN} did not start on any of 5 free ports");
    }
}

/// A running scheduler, killed on drop (its log is printed if the test fails).
#[derive(Debug)]
pub struct Scheduler {
    port: u16,
    admin_port: Option<u16>,
    process: Process,
    config: PathBuf,
    _dir: TempDir,
}

impl Scheduler {
    /// Builder for a single Redis server.
    pub fn builder(redis_url: &str) -> SchedulerBuilder {
        SchedulerBuilder::new(redis_url)
    }

    /// Port of `/healthz` and `/metrics`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT` of the admin API, when it is on.
    pub fn admin_url(&self) -> Option<String> {
        self.admin_port.map(|p| format!("http://{LOOPBACK}:{p}"))
    }

    /// The process id while it runs (part of its lease owner id).
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The config file it runs with (for CLI commands against the same queues).
    pub fn config_path(&self) -> &Path {
        &self.config
    }

    /// `/healthz`: status code and body, or None when nothing answers.
    pub fn health(&self) -> Option<(u16, String)> {
        http_get(self.port, "/healthz")
    }

    /// `/metrics` text (empty when nothing answers).
    pub fn metrics(&self) -> String {
        http_get(self.port, "/metrics")
            .map(|(_, body)| body)
            .unwrap_or_default()
    }

    /// One sample of `/metrics`, e.g. `queuegate_lease_held{queue="main"}`.
    pub fn metric(&self, series: &str) -> Option<f64> {
        self.metrics().lines().find_map(|line| {
            let value = line.strip_prefix(series)?.strip_prefix(' ')?;
            value.trim().parse().ok()
        })
    }

    /// Sends SIGTERM (a graceful stop), without waiting.
    pub fn sigterm(&self) {
        self.process.signal(15);
    }

    /// Sends SIGHUP (reload the config file), without waiting.
    pub fn sighup(&self) {
        self.process.signal(1);
    }

    /// SIGSTOP: the process stalls (a VM paused, a long GC) until
    /// [`Scheduler::sigcont`].
    pub fn sigstop(&self) {
        self.process.signal(19);
    }

    /// SIGCONT: a stalled process goes on.
    pub fn sigcont(&self) {
        self.process.signal(18);
    }

    /// SIGKILL, like a crash.
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Waits for the process to exit; its exit code (None if still running
    /// or killed by a signal).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        self.process.wait_exit(timeout)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// Runs a one-shot command: `queuegate-scheduler --config CONFIG ARGS…`.
pub fn command(config: &Path, args: &[&str]) -> Output {
    Command::new(target_bin(BIN))
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .expect("run queuegate-scheduler")
}

/// An operator at a scheduler VM: a config file naming `queues` on one
/// Redis, in a temporary folder kept while this lives, and its one-shot
/// commands.
#[derive(Debug)]
pub struct Operator {
    _dir: tempfile::TempDir,
    config: std::path::PathBuf,
}

impl Operator {
    /// A config for `queues` on the Redis at `redis_url`.
    pub fn new(redis_url: &str, queues: &[&str]) -> Operator {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = dir.path().join("scheduler.toml");
        let mut text = format!("[redis]\nurl = {redis_url:?}\n");
        for q in queues {
            text.push_str(&format!("[[queue]]\nid = {q:?}\n"));
        }
        std::fs::write(&config, text).expect("write config");
        Operator { _dir: dir, config }
    }

    /// The config file.
    pub fn config(&self) -> &Path {
        &self.config
    }

    /// `queuegate-scheduler --config … ARGS…`: exit code, stdout, stderr.
    pub fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = command(&self.config, args);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    }
}
