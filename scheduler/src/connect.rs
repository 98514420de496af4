//! One Redis handle for a single server or a cluster. Both reconnect by
//! themselves (redis-rs `ConnectionManager` / `cluster_async`); the queue
//! loops back off on errors so a Redis outage costs retries, not a crash.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, IntoConnectionInfo, Pipeline, RedisFuture, TlsCertificates, Value};

use crate::config::{redact, Endpoint, RedisConfig};

/// Why no Redis handle could be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Bad URL or credentials setup (the config was checked, so rare).
    #[error("redis {endpoint}: {source}")]
    Setup {
        /// Redacted endpoint.
        endpoint: String,
        /// The client's error.
        source: redis::RedisError,
    },
    /// The configured CA file could not be read.
    #[error("cannot read [redis] ca_file {path}: {source}")]
    CaFile {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The server or cluster did not answer.
    #[error("cannot reach redis {endpoint}: {source}")]
    Unreachable {
        /// Redacted endpoint.
        endpoint: String,
        /// The client's error.
        source: redis::RedisError,
    },
}

/// A cloneable Redis handle; clones share one multiplexed connection.
#[derive(Clone)]
pub enum RedisConn {
    /// One server, reconnected on failure by the manager.
    Single(ConnectionManager),
    /// A cluster: commands are routed by key slot.
    Cluster(ClusterConnection),
}

impl std::fmt::Debug for RedisConn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RedisConn::Single(_) => "RedisConn::Single",
            RedisConn::Cluster(_) => "RedisConn::Cluster",
        })
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Single(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Single(c) => c.get_db(),
            RedisConn::Cluster(c) => c.get_db(),
        }
    }
}

impl RedisConn {
    /// Runs `cmd` (a keyless command such as SCAN) on the node that holds
    /// `key`'s slot: on a single server, the server; on a cluster, the
    /// primary of the slot, so a SCAN there sees a queue's keys (they all
    /// share one hash tag).
    pub async fn on_slot_of(&mut self, key: &str, cmd: &redis::Cmd) -> redis::RedisResult<Value> {
        use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
        match self {
            RedisConn::Single(c) => cmd.query_async(c).await,
            RedisConn::Cluster(c) => {
                let route = Route::with_key(key.as_bytes(), SlotAddr::Master);
                c.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
            }
        }
    }
}

/// How hard a connect tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// The service: a single server's manager connects lazily and keeps
    /// reconnecting; a cluster connect is retried by the caller.
    Service,
    /// An operator command: one attempt, fail fast.
    Once,
}

/// The endpoint as text without secrets.
pub fn describe(endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Single(u) => redact(u),
        Endpoint::Cluster(nodes) => {
            let nodes: Vec<String> = nodes.iter().map(|u| redact(u)).collect();
            format!("cluster [{}]", nodes.join(", "))
        }
    }
}

/// Opens a handle. With [`Patience::Service`] a single server's handle is
/// returned at once and connects on first use.
pub async fn open(config: &RedisConfig, patience: Patience) -> Result<RedisConn, ConnectError> {
    let endpoint = describe(&config.endpoint);
    let setup = |source| ConnectError::Setup {
        endpoint: endpoint.clone(),
        source,
    };
    let unreachable = |source| ConnectError::Unreachable {
        endpoint: endpoint.clone(),
        source,
    };
    let certs = match &config.ca_file {
        Some(path) => Some(TlsCertificates {
            client_tls: None,
            root_cert: Some(std::fs::read(path).map_err(|e| ConnectError::CaFile {
                path: path.display().to_string(),
                source: e,
            })?),
        }),
        None => None,
    };
    match &config.endpoint {
        Endpoint::Single(url) => {
            let mut info = url.as_str().into_connection_info().map_err(setup)?;
            let mut redis = info.redis_settings().clone();
            if let Some(user) = &config.username {
                redis = redis.set_username(user);
            }
            if let Some(password) = &config.password {
                redis = redis.set_password(password);
            }
            info = info.set_redis_settings(redis);
            let client = match certs {
                Some(certs) => redis::Client::build_with_tls(info, certs),
                None => redis::Client::open(info),
            }
            .map_err(setup)?;
            // Reconnects are quick and few: the queue loops have their own
            // backoff, and a tick must not wait long on a dead server.
            let manager = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(config.connect_timeout))
                .set_response_timeout(Some(config.response_timeout))
                .set_min_delay(Duration::from_millis(50))
                .set_max_delay(Duration::from_millis(200))
                .set_number_of_retries(2);
            match patience {
                Patience::Service => ConnectionManager::new_lazy_with_config(client, manager)
                    .map(RedisConn::Single)
                    .map_err(setup),
                Patience::Once => {
                    let manager = manager.set_number_of_retries(0);
                    ConnectionManager::new_with_config(client, manager)
                        .await
                        .map(RedisConn::Single)
                        .map_err(unreachable)
                }
            }
        }
        Endpoint::Cluster(nodes) => {
            let mut builder = ClusterClientBuilder::new(nodes.clone())
                .connection_timeout(config.connect_timeout)
                .response_timeout(config.response_timeout)
                .retries(match patience {
                    Patience::Service => 2,
                    Patience::Once => 0,
                })
                .min_retry_wait(50)
                .max_retry_wait(200);
            if let Some(user) = &config.username {
                builder = builder.username(user);
            }
            if let Some(password) = &config.password {
                builder = builder.password(password);
            }
            if let Some(certs) = certs {
                builder = builder.certs(certs);
            }
            let client = builder.build().map_err(setup)?;
            client
                .get_async_connection()
                .await
                .map(RedisConn::Cluster)
                .map_err(unreachable)
        }
    }
}
