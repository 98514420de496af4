//! The `redis-rest` gateway as a real process: it binds port 0 on loopback
//! and prints the port it got, so there is no race for a free port; the
//! token is fresh per gateway and passed by environment (not argv).

use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use crate::clock::since_epoch;
use crate::paths::target_bin;
use crate::process::{http_get, wait_until, Process};
use crate::LOOPBACK;

/// The line the gateway prints on stdout once it is bound.
const LISTENING: &str = "redis-rest listening on http://";

/// Options for [`Gateway`].
#[derive(Debug, Clone)]
pub struct GatewayBuilder {
    redis_url: String,
    token: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl GatewayBuilder {
    /// Uses this token instead of a fresh random-ish one.
    pub fn token(mut self, token: &str) -> Self {
        self.token = token.to_string();
        self
    }

    /// An extra flag or value, e.g. `.arg("--max-body-bytes").arg("1024")`.
    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_string());
        self
    }

    /// An environment variable for the process (e.g. `RUST_LOG`).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    /// Starts the gateway and waits until it answers HTTP.
    pub fn start(self) -> Gateway {
        let dir = tempfile::Builder::new()
            .prefix("qg-gateway-")
            .tempdir()
            .expect("temp dir for the gateway");
        let (process, port) = self.launch(&dir, 0, 0);
        Gateway {
            port,
            process,
            builder: self,
            launches: 1,
            _dir: dir,
        }
    }

    /// Runs the gateway on `port` (0: any) and waits until it answers
    /// HTTP; its log is the `n`-th in `dir`.
    fn launch(&self, dir: &TempDir, port: u16, n: u32) -> (Process, u16) {
        let mut cmd = Command::new(target_bin("redis-rest"));
        cmd.args(["--listen", &format!("{LOOPBACK}:{port}")])
            .args(["--redis-url", &self.redis_url])
            .args(&self.args)
            .env("REDIS_REST_TOKEN", &self.token)
            .env("RUST_LOG", "redis_rest=debug");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let name = if n == 0 {
            "redis-rest.log".to_string()
        } else {
            format!("redis-rest-{n}.log")
        };
        let log = dir.path().join(name);
        let mut process = Process::spawn("redis-rest", cmd, &log);

        let mut port = None;
        let printed = wait_until(Duration::from_secs(20), || {
            port = listening_port(&process.log());
            port.is_some() || !process.is_running()
        });
        let Some(port) = port.filter(|_| printed && process.is_running()) else {
            process.fail("did not print its listening line within 20 s");
        };
        if !wait_until(Duration::from_secs(10), || http_get(port, "/").is_some()) {
            process.fail("printed its port but does not answer HTTP");
        }
        (process, port)
    }
}

/// The port from a complete listening line (a line still being written
/// has no newline yet and is not trusted).
fn listening_port(log: &str) -> Option<u16> {
    let start = log.find(LISTENING)?;
    let (line, _) = log[start..].split_once('\n')?;
    line.rsplit(':').next()?.trim().parse().ok()
}

/// A running `redis-rest`, killed on drop (its log is printed when the
/// owning test fails).
#[derive(Debug)]
pub struct Gateway {
    port: u16,
    process: Process,
    /// What it was started with, for [`Gateway::restart`].
    builder: GatewayBuilder,
    /// Processes started so far (each restart logs to a file of its own).
    launches: u32,
    _dir: TempDir,
}

impl Gateway {
    /// A gateway in front of `redis_url` with a fresh token.
    pub fn start(redis_url: &str) -> Gateway {
        Gateway::builder(redis_url).start()
    }

    /// Builder for a gateway in front of `redis_url`.
    pub fn builder(redis_url: &str) -> GatewayBuilder {
        let nanos = since_epoch().as_nanos();
        GatewayBuilder {
            redis_url: redis_url.to_string(),
            token: format!("qg-test-{}-{nanos:x}", std::process::id()),
            args: Vec::new(),
            env: Vec::new(),
        }
    }

    /// `http://127.0.0.1:PORT` — what the worker calls `UPSTASH_REDIS_REST_URL`.
    pub fn url(&self) -> String {
        format!("http://{LOOPBACK}:{}", self.port)
    }

    /// TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The token requests must present (`UPSTASH_REDIS_REST_TOKEN`).
    pub fn token(&self) -> &str {
        &self.builder.token
    }

    /// The gateway's log (stdout and stderr) so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Sends SIGTERM and waits up to `timeout` for a graceful exit; the
    /// exit code, or None if it did not exit (or died by a signal).
    pub fn terminate(&mut self, timeout: Duration) -> Option<i32> {
        self.process.signal(15);
        self.process.wait_exit(timeout)
    }

    /// SIGKILLs the gateway and starts it again on the same port, with the
    /// same token and flags (what a crash and its supervisor's restart
    /// look like to the worker); returns once it answers HTTP.
    pub fn restart(&mut self) {
        self.kill();
        self.start_again();
    }

    /// SIGKILLs the gateway: the worker's calls fail until
    /// [`Gateway::start_again`].
    pub fn kill(&mut self) {
        self.process.kill();
    }

    /// Starts a killed gateway again on its port (a fresh process: test
    /// faults given as flags start over), once it answers HTTP.
    pub fn start_again(&mut self) {
        let (process, port) = self.builder.launch(&self._dir, self.port, self.launches);
        assert_eq!(port, self.port, "the gateway came back on another port");
        self.process = process;
        self.launches += 1;
    }
}
