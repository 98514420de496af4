//! A private `redis-server` on a free port with its own temp dir: no
//! persistence by default, AOF on request so restart tests keep their data;
//! or one server shared by a whole test binary ([`RedisServer::shared`]).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use tempfile::TempDir;

use crate::process::{free_port, wait_until, Process};
use crate::LOOPBACK;

/// Options for [`RedisServer`].
#[derive(Debug, Default, Clone)]
pub struct RedisServerBuilder {
    aof: bool,
    extra: Vec<String>,
    wrapper: Vec<String>,
    /// Outlives every handle: a watcher ends it when the test binary exits.
    reaped: bool,
}

impl RedisServerBuilder {
    /// Append-only file on (fsync every write), so a restart keeps the data.
    pub fn aof(mut self, on: bool) -> Self {
        self.aof = on;
        self
    }

    /// Extra `--flag value` arguments, e.g. `["--cluster-enabled", "yes"]`.
    pub fn arg(mut self, arg: &str) -> Self {
        self.extra.push(arg.to_string());
        self
    }

    /// Runs the server under a wrapper command, e.g. `valgrind
    /// --tool=callgrind`, for benchmarks that count its instructions.
    pub fn wrapper(mut self, command: Vec<String>) -> Self {
        self.wrapper = command;
        self
    }

    /// Starts the server and waits until it answers PING.
    pub fn start(self) -> RedisServer {
        let dir = tempfile::Builder::new()
            .prefix("qg-redis-")
            .tempdir()
            .expect("temp dir for redis-server");
        let mut server = RedisServer {
            options: self,
            port: 0,
            process: None,
            dir,
        };
        // Another process may take the port between probe and bind: retry.
        for _ in 0..5 {
            server.port = free_port();
            if server.launch() {
                return server;
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }
}

/// A running `redis-server`, killed (and its temp dir removed) on drop.
#[derive(Debug)]
pub struct RedisServer {
    options: RedisServerBuilder,
    port: u16,
    process: Option<Process>,
    dir: TempDir,
}

impl RedisServer {
    /// A server with default options (no persistence).
    pub fn start() -> RedisServer {
        RedisServerBuilder::default().start()
    }

    /// One server for the whole test binary, started on first use. For
    /// tests that keep to their own keys (a queue of their own) and neither
    /// stop it, flush it nor read every key; the others start their own.
    ///
    /// Statics are never dropped, so a watcher beside the server kills it
    /// and removes its directory once the test binary has exited.
    pub fn shared() -> &'static RedisServer {
        static SHARED: OnceLock<RedisServer> = OnceLock::new();
        SHARED.get_or_init(|| {
            RedisServerBuilder {
                reaped: true,
                ..RedisServerBuilder::default()
            }
            .start()
        })
    }

    /// Builder for servers with AOF or extra flags.
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{LOOPBACK}:{}", self.port)
    }

    /// SIGKILLs the server; its data dir stays for [`RedisServer::restart`].
    pub fn stop(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.kill();
        }
    }

    /// SIGSTOPs the server: it holds its connections and answers nothing
    /// (a stalled host, a long fork) until [`RedisServer::resume`].
    pub fn pause(&self) {
        if let Some(p) = &self.process {
            p.signal(19);
        }
    }

    /// SIGCONTs a paused server.
    pub fn resume(&self) {
        if let Some(p) = &self.process {
            p.signal(18);
        }
    }

    /// Starts the server again on the same port and data dir.
    pub fn restart(&mut self) {
        self.stop();
        assert!(
            self.launch(),
            "redis-server did not restart on port {}",
            self.port
        );
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// Sends one inline command and returns the raw RESP reply (for
    /// readiness checks and quick assertions without a client).
    pub fn raw_command(&self, line: &str) -> std::io::Result<String> {
        raw_command(self.port, line)
    }

    fn launch(&mut self) -> bool {
        let dir = self.dir.path();
        let mut cmd = match self.options.wrapper.split_first() {
            Some((program, args)) => {
                let mut cmd = Command::new(program);
                cmd.args(args).arg("redis-server");
                cmd
            }
            None if self.options.reaped => reaped_command(dir),
            None => Command::new("redis-server"),
        };
        cmd.current_dir(dir)
            .args(["--port", &self.port.to_string()])
            .args(["--bind", LOOPBACK])
            .args(["--dir", &dir.to_string_lossy()])
            .args(["--save", ""])
            .args(["--daemonize", "no"])
            .args(["--logfile", ""]);
        if self.options.aof {
            cmd.args(["--appendonly", "yes", "--appendfsync", "always"]);
        } else {
            cmd.args(["--appendonly", "no"]);
        }
        cmd.args(&self.options.extra);
        let log = dir.join("redis.log");
        let mut process = Process::spawn("redis-server", cmd, &log);
        let port = self.port;
        // Under a wrapper such as valgrind the server starts far slower.
        let patience = if self.options.wrapper.is_empty() {
            10
        } else {
            120
        };
        let up = wait_until(Duration::from_secs(patience), || {
            if !process.is_running() {
                return true;
            }
            matches!(raw_command(port, "PING"), Ok(r) if r.starts_with("+PONG"))
        });
        if up && process.is_running() {
            self.process = Some(process);
            return true;
        }
        // Exited (port clash) or never answered: caller retries or panics.
        eprintln!(
            "redis-server on port {port} failed to start:\n{}",
            process.log()
        );
        process.kill();
        false
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        // The process handle prints the log when the test is failing.
        self.stop();
    }
}

/// `redis-server` (its arguments appended by the caller) under a shell
/// that polls the test binary every 200 ms and, once it is gone, kills the
/// server and removes `dir`: the end of [`RedisServer::shared`].
fn reaped_command(dir: &std::path::Path) -> Command {
    const WATCH: &str = r#"owner=$1; dir=$2; shift 2
"$@" & server=$!
while kill -0 "$owner" 2>/dev/null && kill -0 "$server" 2>/dev/null; do sleep 0.2; done
kill -9 "$server" 2>/dev/null; wait; rm -rf "$dir""#;
    let mut cmd = Command::new("sh");
    cmd.args(["-c", WATCH, "redis-reaper"])
        .arg(std::process::id().to_string())
        .arg(dir)
        .arg("redis-server");
    cmd
}

fn raw_command(port: u16, line: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect((LOOPBACK, port))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    s.write_all(format!("{line}\r\n").as_bytes())?;
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}
