//! Serving: `run(listener, config, shutdown)` builds the backend and the
//! router and serves until `shutdown` resolves, then lets in-flight
//! requests finish (axum graceful shutdown).

use std::future::Future;
use tokio::net::TcpListener;

use crate::backend::Backend;
use crate::config::Config;
use crate::error::StartError;
use crate::protocol::Command;
use crate::routes::{self, AppState};

/// Serves the gateway on `listener` until `shutdown` completes.
pub async fn run(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), StartError> {
    config.validate()?;
    let backend = Backend::connect_lazy(&config.redis_url, config.redis_timeout)?;
    tokio::spawn(report_redis(backend.clone()));
    let app = routes::router(AppState::new(backend, &config.token, config.max_body_bytes));
    tracing::info!(addr = %listener.local_addr()?, ?config, "serving");
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    tracing::info!("stopped");
    Ok(())
}

/// One PING at start-up, so the log says at once whether Redis is there.
/// The gateway serves either way and connects when Redis comes up.
async fn report_redis(backend: Backend) {
    let ping = Command::new(vec![b"PING".to_vec()]);
    let Ok(ping) = ping else { return };
    match backend.command(&ping).await {
        Ok(_) => tracing::info!("redis reachable"),
        Err(e) => tracing::warn!(error = %e, "redis not reachable yet; will connect on demand"),
    }
}

/// Resolves on ctrl-c or SIGTERM (systemd, `kill`, test harnesses).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: rely on SIGTERM alone.
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    tracing::info!("shutdown signal received");
}
