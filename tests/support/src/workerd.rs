//! A worker served by the `workerd` binary itself (from node_modules), with
//! a capnp config written here: no wrangler, no Node, no proxy in front, so
//! the process's CPU time is the worker's own. Benchmarks use it, the
//! system tests' edge stack and the local demo when it sends a crowd; the
//! demo without a crowd and the tests of the worker as a shop starts it
//! locally keep `wrangler dev` ([`crate::Wrangler`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use crate::paths::repo_root;
use crate::process::{free_port, http_get, wait_until, Process};
use crate::wrangler::COMPATIBILITY_DATE;
use crate::LOOPBACK;

/// The workerd binary wrangler itself runs (`npm ci` installs it).
pub fn workerd_bin() -> PathBuf {
    let bin = repo_root().join("node_modules/@cloudflare/workerd-linux-64/bin/workerd");
    assert!(
        bin.exists(),
        "{} is missing; run `npm ci` in the repository",
        bin.display()
    );
    bin
}

/// What a [`Workerd`] serves.
#[derive(Debug, Clone)]
pub enum Script {
    /// The built worker: `worker/build/index.js` and its wasm.
    Built,
    /// Another build of the worker: a directory holding a copy of
    /// `index.js` and `index_bg.wasm` (the edge bench compares builds).
    BuiltIn(PathBuf),
    /// One plain-JS ES module (its source).
    Js(String),
}

/// A running `workerd serve`, killed on drop.
#[derive(Debug)]
pub struct Workerd {
    port: u16,
    process: Process,
    _dir: TempDir,
}

impl Workerd {
    /// Serves `script` with `bindings` (vars and secrets alike become text
    /// bindings, as `wrangler dev` makes them) on a free loopback port,
    /// with outbound fetches allowed to loopback, and waits until it
    /// answers `ready_path` at all (any status).
    pub fn start(
        script: &Script,
        bindings: &BTreeMap<String, String>,
        ready_path: &str,
    ) -> Workerd {
        Self::start_on(script, bindings, ready_path, None)
    }

    /// [`Self::start`] on `port` when given (the local demo serves on
    /// 8787), else on a free one.
    pub fn start_on(
        script: &Script,
        bindings: &BTreeMap<String, String>,
        ready_path: &str,
        port: Option<u16>,
    ) -> Workerd {
        let dir = tempfile::Builder::new()
            .prefix("qg-workerd-")
            .tempdir()
            .expect("temp dir for workerd");
        // The worker's static assets (the page, the Lua scripts), bound
        // as ASSETS through a read-only disk service, as wrangler binds
        // its [assets] folder. A plain-JS script gets none.
        let mut assets = None;
        let modules = match script {
            Script::Built | Script::BuiltIn(_) => {
                // A copy (BuiltIn) may be an older build on purpose: the
                // edge bench compares builds.
                let build = match script {
                    Script::BuiltIn(dir) => dir.clone(),
                    _ => {
                        let build = repo_root().join("worker/build");
                        crate::fresh::assert_worker_fresh(&build, "scripts/build-worker");
                        build
                    }
                };
                for f in ["index.js", "index_bg.wasm"] {
                    assert!(
                        build.join(f).exists(),
                        "the worker is not built ({} missing); run scripts/build-worker",
                        build.join(f).display()
                    );
                    std::fs::copy(build.join(f), dir.path().join(f)).expect("copy the build");
                }
                // An older build copied without its assets uses today's.
                let own = build.join("assets");
                assets = Some(if own.is_dir() {
                    own
                } else {
                    repo_root().join("worker/build/assets")
                });
                "(name = \"index.js\", esModule = embed \"index.js\"),\n    \
                 (name = \"index_bg.wasm\", wasm = embed \"index_bg.wasm\")"
            }
            Script::Js(source) => {
                std::fs::write(dir.path().join("worker.js"), source).expect("write worker.js");
                "(name = \"worker.js\", esModule = embed \"worker.js\")"
            }
        };
        let mut bindings: String = bindings
            .iter()
            .map(|(k, v)| format!("    (name = {}, text = {}),\n", capnp_str(k), capnp_str(v)))
            .collect();
        let mut services = String::new();
        if let Some(assets) = &assets {
            bindings.push_str("    (name = \"ASSETS\", service = \"assets\"),\n");
            services = format!(
                "    (name = \"assets\", disk = (path = {}, writable = false)),\n",
                capnp_str(&assets.to_string_lossy())
            );
        }
        let mut last_log = String::new();
        // A free port is free when picked but may be taken before workerd
        // binds it: try a few. A given port is tried once.
        let tries = if port.is_some() { 1 } else { 3 };
        for _ in 0..tries {
            let port = port.unwrap_or_else(free_port);
            let config = config(modules, &bindings, &services, port);
            let path = dir.path().join("config.capnp");
            std::fs::write(&path, config).expect("write config.capnp");
            let inspect = matches!(script, Script::Built)
                .then(|| std::env::var(INSPECTOR_ENV).ok())
                .flatten();
            let mut process = spawn(&path, dir.path(), inspect.as_deref());
            let up = wait_until(Duration::from_secs(30), || {
                !process.is_running()
                    || (http_get(port, ready_path).is_some() && process.listens_on(port))
            });
            if up && process.is_running() {
                return Workerd {
                    port,
                    process,
                    _dir: dir,
                };
            }
            last_log = process.log();
            process.kill();
        }
        panic!("workerd did not serve {ready_path}; its log:\n{last_log}");
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{LOOPBACK}:{}", self.port)
    }

    /// The workerd process id (no wrapper in between).
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// CPU time the process has used so far, user + system, from
    /// `/proc/PID/stat` (clock ticks, converted with `getconf CLK_TCK`).
    pub fn cpu_time(&self) -> Option<Duration> {
        process_cpu_time(self.pid()?)
    }

    /// workerd's output so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}

/// User + system CPU time of a whole process (all its threads, living or
/// exited) from `/proc/PID/stat`.
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of stat are utime and stime; `after` starts at 3.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    let hz = clock_ticks_per_second();
    Some(Duration::from_nanos((utime + stime) * 1_000_000_000 / hz))
}

fn clock_ticks_per_second() -> u64 {
    static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *HZ.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
            .filter(|&hz| hz > 0)
            .unwrap_or(100)
    })
}

/// Set to `127.0.0.1:PORT`, the built worker's workerd opens its V8
/// inspector there (for a CPU profile: bench/edge-profile.mjs).
pub const INSPECTOR_ENV: &str = "QG_WORKERD_INSPECTOR_ADDR";

fn spawn(config: &Path, dir: &Path, inspector: Option<&str>) -> Process {
    let mut cmd = Command::new(workerd_bin());
    cmd.current_dir(dir)
        .arg("serve")
        .arg(config)
        .arg("--verbose");
    if let Some(addr) = inspector {
        cmd.arg(format!("--inspector-addr={addr}"));
    }
    Process::spawn("workerd", cmd, &dir.join("workerd.log"))
}

/// A capnp text literal (JSON string escapes are valid capnp escapes).
fn capnp_str(s: &str) -> String {
    format!("{s:?}")
}

fn config(modules: &str, bindings: &str, services: &str, port: u16) -> String {
    format!(
        r#"using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "loopback", network = (allow = ["local"])),
{services}  ],
  sockets = [(name = "http", address = "{LOOPBACK}:{port}", http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = [
    {modules}
  ],
  compatibilityDate = "{COMPATIBILITY_DATE}",
  bindings = [
{bindings}  ],
  globalOutbound = "loopback",
);
"#
    )
}
