//! A child process whose output goes to a log file, killed on drop, with the
//! log shown when the test that owns it panics.

use std::fs::File;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port that was free a moment ago on 127.0.0.1. Callers that bind it
/// later retry on a clash (see `RedisServer`), since another process may win
/// the race.
pub fn free_port() -> u16 {
    TcpListener::bind((crate::LOOPBACK, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral loopback port")
}

/// Polls `ready` every 20 ms until it returns true or `timeout` passes.
pub fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if ready() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// True once something accepts TCP connections on `port`.
pub fn port_open(port: u16) -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// A running child process with its output captured in `log_path`.
#[derive(Debug)]
pub struct Process {
    name: String,
    child: Option<Child>,
    log_path: PathBuf,
}

impl Process {
    /// Spawns `cmd` with stdout and stderr appended to `log_path`.
    pub fn spawn(name: &str, mut cmd: Command, log_path: &Path) -> Process {
        let log = File::options()
            .create(true)
            .append(true)
            .open(log_path)
            .expect("open process log");
        let err = log.try_clone().expect("clone log handle");
        // Own process group, so a kill also reaches grandchildren
        // (wrangler runs workerd as a child of node).
        let child = cmd
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
        Process {
            name: name.to_string(),
            child: Some(child),
            log_path: log_path.to_path_buf(),
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// True while the process has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Sends a signal by number (e.g. 15 for SIGTERM) to the process
    /// group, without waiting.
    pub fn signal(&self, signal: i32) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg("--")
                .arg(format!("-{pid}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Waits up to `timeout` for the process to exit; returns its exit code
    /// (None if it was killed by a signal or is still running).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        let deadline = Instant::now() + timeout;
        while let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return status.code();
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    /// SIGKILLs the process group and reaps the process. Idempotent.
    pub fn kill(&mut self) {
        if self.child.is_some() {
            self.signal(9);
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// True when a process of this one's group (the process itself or a
    /// child such as wrangler's workerd) holds the listening socket on
    /// 127.0.0.1:`port`. A readiness probe alone cannot tell our server from
    /// another test's that won the race for the same free port.
    pub fn listens_on(&self, port: u16) -> bool {
        let Some(group) = self.pid() else {
            return false;
        };
        let inodes = listening_inodes(port);
        !inodes.is_empty() && group_holds_socket(group, &inodes)
    }

    /// Everything the process wrote so far.
    pub fn log(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log_path) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    /// Panics with the log attached: for a process that failed to come up.
    pub fn fail(&mut self, why: &str) -> ! {
        self.kill();
        panic!("{} {why}; its log:\n{}", self.name, self.log());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            let log = self.log();
            let tail: String = {
                let lines: Vec<&str> = log.lines().collect();
                lines[lines.len().saturating_sub(60)..].join("\n")
            };
            eprintln!(
                "---- {} log ({}) ----\n{tail}\n----",
                self.name,
                self.log_path.display()
            );
        }
    }
}

/// A minimal HTTP/1.1 GET on loopback for readiness checks: the status code
/// and body, or None when nothing answers yet. Tests use a real client.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut s = TcpStream::connect((crate::LOOPBACK, port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    // Read until the peer closes or goes quiet; a status line is enough.
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        bytes.extend_from_slice(&buf[..n]);
        if response_complete(&bytes) {
            break;
        }
    }
    let raw = String::from_utf8_lossy(&bytes);
    let status = raw.split_whitespace().nth(1)?.parse().ok()?;
    let body = raw.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// True once `bytes` holds the headers and a Content-Length body.
fn response_complete(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    head.lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .is_some_and(|len| body.len() >= len)
}

/// Inodes of the sockets listening on `port` (IPv4 or IPv6), from
/// /proc/net/tcp{,6}: local address is field 1 (`HEXADDR:HEXPORT`), the
/// state field 3 (`0A` is LISTEN), the inode field 9.
fn listening_inodes(port: u16) -> Vec<String> {
    let suffix = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|t| std::fs::read_to_string(t).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|line| {
                    let f: Vec<&str> = line.split_whitespace().collect();
                    (f.len() > 9 && f[1].ends_with(&suffix) && f[3] == "0A")
                        .then(|| f[9].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// True when a process whose group is `group` has one of `inodes` open.
fn group_holds_socket(group: u32, inodes: &[String]) -> bool {
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|entry| {
        let pid = entry.file_name();
        let Some(pid) = pid
            .to_str()
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let in_group = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                // Field 5 (pgrp), counted after the ')' closing the name.
                let after = &stat[stat.rfind(')')? + 1..];
                after.split_whitespace().nth(2)?.parse::<u32>().ok()
            })
            == Some(group);
        in_group
            && std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|fds| {
                    fds.flatten().any(|fd| {
                        std::fs::read_link(fd.path())
                            .map(|target| wanted.iter().any(|w| target.as_os_str() == w.as_str()))
                            .unwrap_or(false)
                    })
                })
                .unwrap_or(false)
    })
}
