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
    let app = routes::router(
        AppState::new(backend, &config.token, config.max_body_bytes)
            .with_quota(config.max_requests)
            .with_reply_delay(config.fault_delay_reply.clone()),
    );
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
