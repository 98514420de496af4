//! The built worker (wasm) under `wrangler dev --local`, i.e. real workerd,
//! on a free port with its own config, secrets file and state dir.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tempfile::TempDir;

use crate::gateway::Gateway;
use crate::paths::repo_root;
use crate::process::{free_port, http_get, wait_until, Process};
use crate::LOOPBACK;

/// The compatibility date the pinned workerd accepts (see TOOLCHAIN notes).
pub const COMPATIBILITY_DATE: &str = "2026-05-01";

/// The identity secret of every local worker (loopback only, never deployed):
/// tests mint visitor cookies with it.
pub const IDENTITY_SECRET: &str = "test-identity-secret-0123456789abcdef";
/// The secret a local worker signs forwarded requests with; the origin
/// behind it verifies with the same one.
pub const ORIGIN_SECRET: &str = "test-origin-secret-0123456789abcdefgh";

/// Options for [`Wrangler`]: plain vars and secrets (`.dev.vars`).
#[derive(Debug, Default, Clone)]
pub struct WranglerBuilder {
    vars: BTreeMap<String, String>,
    secrets: BTreeMap<String, String>,
    port: Option<u16>,
}

impl WranglerBuilder {
    /// A `[vars]` entry.
    pub fn var(mut self, key: &str, value: &str) -> Self {
        self.vars.insert(key.into(), value.into());
        self
    }

    /// A secret, written to `.dev.vars` beside the generated config, the
    /// way a developer keeps them locally.
    pub fn secret(mut self, key: &str, value: &str) -> Self {
        self.secrets.insert(key.into(), value.into());
        self
    }

    /// Serve on this port instead of a free one (the local demo uses 8787).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// The same vars and secrets served by the `workerd` binary directly,
    /// without wrangler's Node process and proxy (for measurements, and
    /// the local demo's crowd), on [`Self::port`] when set.
    pub fn start_workerd(self) -> crate::workerd::Workerd {
        self.start_workerd_from(crate::workerd::Script::Built)
    }

    /// [`Self::start_workerd`] serving `script` (another build of the worker).
    pub fn start_workerd_from(self, script: crate::workerd::Script) -> crate::workerd::Workerd {
        let mut bindings = self.vars;
        bindings.extend(self.secrets);
        crate::workerd::Workerd::start_on(&script, &bindings, "/queue/health", self.port)
    }

    /// Starts `wrangler dev` on the prebuilt wasm and waits until
    /// `/queue/health` answers.
    pub fn start(self) -> Wrangler {
        let entry = built_entry();
        let dir = tempfile::Builder::new()
            .prefix("qg-wrangler-")
            .tempdir()
            .expect("temp dir for wrangler");
        let assets = entry.with_file_name("assets");
        let mut config = format!(
            "name = \"queuegate-test\"\nmain = {:?}\ncompatibility_date = \"{COMPATIBILITY_DATE}\"\n\n\
             [assets]\ndirectory = {:?}\nbinding = \"ASSETS\"\nrun_worker_first = true\nhtml_handling = \"none\"\n\n[vars]\n",
            entry.to_string_lossy(),
            assets.to_string_lossy()
        );
        for (k, v) in &self.vars {
            config.push_str(&format!("{k} = {v:?}\n"));
        }
        std::fs::write(dir.path().join("wrangler.toml"), config).expect("write wrangler.toml");
        let dev_vars: String = self
            .secrets
            .iter()
            .map(|(k, v)| format!("{k}={v:?}\n"))
            .collect();
        std::fs::write(dir.path().join(".dev.vars"), dev_vars).expect("write .dev.vars");

        // A free port is free when picked, but another test's server may
        // take it before wrangler binds it (CI saw wrangler fail with
        // "Address already in use" while the other server answered the
        // health probe): ready means our own process group holds the port.
        // A given port is tried once; picked ones up to three times.
        let tries = if self.port.is_some() { 1 } else { 3 };
        let root = repo_root();
        let mut last_log = String::new();
        for attempt in 0..tries {
            let port = self.port.unwrap_or_else(free_port);
            let inspector = free_port();
            let mut cmd = Command::new("node");
            cmd.current_dir(dir.path())
                .arg(root.join("node_modules/wrangler/bin/wrangler.js"))
                .args(["dev", "--local", "--ip", LOOPBACK])
                .args(["--port", &port.to_string()])
                .args(["--inspector-port", &inspector.to_string()])
                .args([
                    "--show-interactive-dev-session=false",
                    "--log-level",
                    "info",
                ])
                .arg("--config")
                .arg(dir.path().join("wrangler.toml"))
                .arg("--persist-to")
                .arg(dir.path().join("state"));
            for (k, v) in offline_env() {
                cmd.env(k, v);
            }
            let log = dir.path().join(format!("wrangler-{attempt}.log"));
            let mut process = Process::spawn("wrangler dev", cmd, &log);
            let up = wait_until(Duration::from_secs(60), || {
                !process.is_running()
                    || process.log().contains("Address already in use")
                    || (http_get(port, "/queue/health").is_some() && process.listens_on(port))
            });
            if up && process.is_running() && process.listens_on(port) {
                return Wrangler {
                    port,
                    process,
                    _dir: dir,
                };
            }
            last_log = process.log();
            process.kill();
        }
        panic!("wrangler dev did not serve /queue/health within 60 s; its log:\n{last_log}");
    }
}

/// The environment that keeps wrangler from reaching remote hosts.
pub fn offline_env() -> [(&'static str, &'static str); 4] {
    [
        ("WRANGLER_SEND_METRICS", "false"),
        ("WRANGLER_SEND_ERROR_REPORTS", "false"),
        ("WRANGLER_HIDE_BANNER", "true"),
        ("CLOUDFLARE_CF_FETCH_ENABLED", "false"),
    ]
}

/// The bundle's entry module, the `main` of wrangler.toml.
fn built_entry() -> PathBuf {
    let build = repo_root().join("worker/build");
    crate::fresh::assert_worker_fresh(&build, "scripts/build-worker");
    build.join("index.js")
}

/// A running `wrangler dev`, killed with its workerd on drop.
#[derive(Debug)]
pub struct Wrangler {
    port: u16,
    process: Process,
    _dir: TempDir,
}

impl Wrangler {
    /// Builder for vars and secrets.
    pub fn builder() -> WranglerBuilder {
        WranglerBuilder::default()
    }

    /// The preset for a local stack: queue `main` behind `gateway`,
    /// forwarding to `origin_url`, with [`IDENTITY_SECRET`] and
    /// [`ORIGIN_SECRET`]. Cookies stay `Secure`; later `var`/`secret` calls
    /// override any entry.
    pub fn local(gateway: &Gateway, origin_url: &str) -> WranglerBuilder {
        Wrangler::builder()
            .var("QUEUE_ID", "main")
            .var("QUEUES", "main")
            .var("ORIGIN_URL", origin_url)
            .secret("UPSTASH_REDIS_REST_URL", &gateway.url())
            .secret("UPSTASH_REDIS_REST_TOKEN", gateway.token())
            .secret("IDENTITY_SECRET", IDENTITY_SECRET)
            .secret("ORIGIN_SIGNING_SECRET", ORIGIN_SECRET)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{LOOPBACK}:{}", self.port)
    }

    /// The log of wrangler and workerd so far.
    pub fn log(&self) -> String {
        self.process.log()
    }
}
