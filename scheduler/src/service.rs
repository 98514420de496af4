//! `run(config, shutdown)`: the HTTP listener, one Redis handle and one task
//! per queue; when `shutdown` resolves every task finishes its tick and
//! releases its lease before `run` returns.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::collections::{BTreeMap, BTreeSet};

use queuegate_shared::{QueueId, QueueKeys};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, QueueConfig};
use crate::connect::{self, ConnectError, Patience, RedisConn};
use crate::metrics::Metrics;
use crate::queue::QueueWorker;

/// Why the service stopped on its own.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The HTTP listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The configured address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The Redis handle could not be set up.
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// This process's lease owner id: `hostname/pid/random`, unique per start
/// so a restarted process never mistakes an old lease for its own.
pub fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string());
    let mut nonce = [0u8; 4];
    // Without OS randomness the pid still separates local processes.
    let _ = getrandom::getrandom(&mut nonce);
    format!("{host}/{}/{}", std::process::id(), hex::encode(nonce))
}

/// Caches every script in Redis (on a cluster, on every primary). The edge
/// calls EVALSHA first; without this the first visitors on a fresh Redis
/// each pay an EVAL fallback round trip. A failure only costs that.
async fn preload_scripts<C: redis::aio::ConnectionLike + Send>(conn: &mut C) {
    for script in queuegate_shared::script::all() {
        let loaded: Result<String, _> = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source())
            .query_async(conn)
            .await;
        if let Err(e) = loaded {
            tracing::warn!(script = script.name(), error = %e, "could not preload the script");
        }
    }
}

/// Runs every configured queue until `shutdown` resolves.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), RunError> {
    run_reloading(config, None, shutdown).await
}

/// Like [`run`]; with `reload_from`, SIGHUP reloads that file: new queue
/// settings take effect at once without touching the leases, and a file
/// that does not validate (or changes what needs a restart) is refused
/// with the reason logged, the running config kept.
pub async fn run_reloading(
    config: Config,
    reload_from: Option<PathBuf>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let owner: Arc<str> = Arc::from(owner_id());
    let metrics = Arc::new(Metrics::new());
    for q in &config.queues {
        // Unhealthy after a few missed ticks, never sooner than a second
        // (registered before Redis is reached, so /healthz reports them).
        let stale = Duration::from_millis((5 * q.settings.tick_ms).max(1_000));
        metrics.add_queue(q.id.as_str(), &q.settings, stale);
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| RunError::Listen {
            addr: config.listen,
            source,
        })?;
    // The admin API's own listener, bound now so a taken address fails
    // the start; it serves once Redis is reachable.
    let admin_listener = match &config.admin {
        Some(admin) => Some(tokio::net::TcpListener::bind(admin.listen).await.map_err(
            |source| RunError::Listen {
                addr: admin.listen,
                source,
            },
        )?),
        None => None,
    };
    let cancel = CancellationToken::new();
    let http = tokio::spawn({
        let router = crate::http::router(metrics.clone(), owner.clone());
        let stop = cancel.clone();
        async move {
            let served = axum::serve(listener, router)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::error!(error = %e, "http server stopped");
            }
        }
    });
    tracing::info!(
        owner = %owner,
        redis = %connect::describe(&config.redis.endpoint),
        listen = %config.listen,
        queues = config.queues.len(),
        "scheduler starting"
    );

    tokio::pin!(shutdown);
    let conn = tokio::select! {
        conn = connect_with_retry(&config) => conn?,
        () = &mut shutdown => {
            cancel.cancel();
            let _ = http.await;
            return Ok(());
        }
    };

    preload_scripts(&mut conn.clone()).await;

    // The running config, for the admin API: a reload replaces it.
    let (config_tx, config_rx) = watch::channel(Arc::new(config.clone()));
    let admin = match (admin_listener, &config.admin) {
        (Some(listener), Some(admin)) => {
            let router = crate::admin::router(config_rx, admin, conn.clone(), metrics.clone());
            let stop = cancel.clone();
            tracing::info!(listen = %admin.listen, tokens = admin.tokens.len(), "admin API on");
            Some(tokio::spawn(async move {
                let served = axum::serve(listener, router)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await;
                if let Err(e) = served {
                    tracing::error!(error = %e, "admin API stopped");
                }
            }))
        }
        _ => None,
    };

    let mut queues = Queues {
        tasks: JoinSet::new(),
        running: BTreeMap::new(),
        owner,
        conn: conn.clone(),
        metrics: metrics.clone(),
        cancel: cancel.clone(),
    };
    queues.apply(&config);
    let (reloads_tx, mut reloads) = mpsc::channel::<Config>(1);
    if let Some(path) = reload_from {
        tokio::spawn(reload_on_hangup(
            path,
            config,
            reloads_tx,
            cancel.child_token(),
        ));
    }
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(new) = reloads.recv() => {
                queues.apply(&new);
                config_tx.send_replace(Arc::new(new));
            }
            Some(done) = queues.tasks.join_next() => {
                if let Err(e) = done {
                    tracing::error!(error = %e, "a queue task panicked");
                }
            }
        }
    }
    tracing::info!("shutting down: finishing ticks and releasing leases");
    cancel.cancel();
    while let Some(done) = queues.tasks.join_next().await {
        if let Err(e) = done {
            tracing::error!(error = %e, "a queue task panicked");
        }
    }
    let _ = http.await;
    if let Some(admin) = admin {
        let _ = admin.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// The queues this process runs: one task each, fed its reloaded config.
struct Queues {
    tasks: JoinSet<()>,
    /// Each running queue's config channel and its task's stop.
    running: BTreeMap<QueueId, (watch::Sender<QueueConfig>, CancellationToken)>,
    owner: Arc<str>,
    conn: RedisConn,
    metrics: Arc<Metrics>,
    cancel: CancellationToken,
}

impl Queues {
    /// Runs `config`'s queues: a new one starts (as a standby, then takes
    /// the lease like any), a known one gets its new settings and
    /// schedule, one no longer listed finishes its tick and releases its
    /// lease.
    fn apply(&mut self, config: &Config) {
        let listed: BTreeSet<&QueueId> = config.queues.iter().map(|q| &q.id).collect();
        let gone: Vec<QueueId> = self
            .running
            .keys()
            .filter(|id| !listed.contains(id))
            .cloned()
            .collect();
        for id in gone {
            if let Some((_, stop)) = self.running.remove(&id) {
                tracing::info!(
                    queue = id.as_str(),
                    "queue removed from the config: stopping it"
                );
                stop.cancel();
                self.metrics.remove_queue(id.as_str());
            }
        }
        for q in &config.queues {
            if let Some((tx, _)) = self.running.get(&q.id) {
                tx.send_replace(q.clone());
                continue;
            }
            if !self.running.is_empty() {
                tracing::info!(
                    queue = q.id.as_str(),
                    "queue added to the config: starting it"
                );
            }
            // Unhealthy after a few missed ticks, never sooner than a second.
            let stale = Duration::from_millis((5 * q.settings.tick_ms).max(1_000));
            self.metrics.add_queue(q.id.as_str(), &q.settings, stale);
            let (tx, rx) = watch::channel(q.clone());
            let stop = self.cancel.child_token();
            let worker = QueueWorker::new(
                QueueKeys::new(&config.prefix, &q.id),
                q.settings.clone(),
                self.owner.clone(),
                self.conn.clone(),
                self.metrics.clone(),
            )
            .with_file(q.schedule, q.fingerprint())
            .with_response_timeout(config.redis.response_timeout)
            .with_idle_waits(config.redis.clone())
            .with_reloads(rx);
            self.tasks.spawn(worker.run(stop.clone()));
            self.running.insert(q.id.clone(), (tx, stop));
        }
    }
}

/// Reloads `path` on every SIGHUP until `cancel`, handing each valid
/// config to the service; see [`run_reloading`].
async fn reload_on_hangup(
    path: PathBuf,
    mut running: Config,
    reloads: mpsc::Sender<Config>,
    cancel: CancellationToken,
) {
    #[cfg(unix)]
    let mut hangups = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; config reload is off");
            return;
        }
    };
    loop {
        #[cfg(unix)]
        tokio::select! {
            () = cancel.cancelled() => return,
            got = hangups.recv() => if got.is_none() { return },
        }
        #[cfg(not(unix))]
        {
            let _ = (&path, &reloads);
            return cancel.cancelled().await;
        }
        // Secret files are read again: a changed one is a changed [redis].
        let loaded =
            crate::config::Environment::from_process().and_then(|env| Config::load(&path, &env));
        let new = match loaded {
            Ok(new) => new,
            Err(e) => {
                tracing::error!("config reload refused, running config kept: {e}");
                continue;
            }
        };
        if let Some(why) = running.restart_needed(&new) {
            tracing::error!(
                path = %path.display(),
                "config reload refused, running config kept: {why}, which needs a restart"
            );
            continue;
        }
        if reloads.send(new.clone()).await.is_err() {
            return;
        }
        tracing::info!(path = %path.display(), queues = new.queues.len(), "config reloaded");
        running = new;
    }
}

/// A single server's handle is lazy (never fails here); a cluster needs its
/// slot map first, so it is retried until it comes.
async fn connect_with_retry(config: &Config) -> Result<RedisConn, RunError> {
    let mut wait = Duration::from_millis(100);
    loop {
        match connect::open(&config.redis, Patience::Service).await {
            Ok(conn) => return Ok(conn),
            Err(e @ (ConnectError::Setup { .. } | ConnectError::CaFile { .. })) => {
                return Err(e.into())
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "redis not reachable yet");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
        }
    }
}
