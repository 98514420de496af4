//! The `[redis]` section: one server or a cluster, credentials (the env
//! may override them), TLS roots and timeouts; and [`redact`], which every
//! message naming a URL goes through (here, so `config` needs no `connect`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::{env, ConfigError, Origin};

/// Redis when the config names none.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 1_000;
pub const DEFAULT_RESPONSE_TIMEOUT_MS: u64 = 500;

/// How to reach Redis.
#[derive(Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// One server (or a proxy): one multiplexed connection, reconnected.
    Single(String),
    /// Redis Cluster, from these seed nodes.
    Cluster(Vec<String>),
}

impl std::fmt::Debug for Endpoint {
    // URLs may carry a password: show them redacted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Single(u) => write!(f, "Single({})", redact(u)),
            Endpoint::Cluster(n) => {
                let nodes: Vec<String> = n.iter().map(|u| redact(u)).collect();
                write!(f, "Cluster({nodes:?})")
            }
        }
    }
}

/// The `[redis]` section after env overrides.
#[derive(Clone)]
pub struct RedisConfig {
    /// Server or cluster.
    pub endpoint: Endpoint,
    /// ACL user (overrides one in the URL).
    pub username: Option<String>,
    /// Password (overrides one in the URL). A secret: never logged.
    pub password: Option<String>,
    /// PEM roots to trust for `rediss://` instead of the system store
    /// (a private CA).
    pub ca_file: Option<PathBuf>,
    /// One connection attempt's limit.
    pub connect_timeout: Duration,
    /// One command's limit; bounds the worst tick (see the lease rule).
    pub response_timeout: Duration,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("endpoint", &self.endpoint)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("ca_file", &self.ca_file)
            .field("connect_timeout", &self.connect_timeout)
            .field("response_timeout", &self.response_timeout)
            .finish()
    }
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRedis {
    url: Option<String>,
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    cluster: bool,
    pub(super) key_prefix: Option<String>,
    username: Option<String>,
    password: Option<String>,
    ca_file: Option<PathBuf>,
    connect_timeout_ms: Option<u64>,
    response_timeout_ms: Option<u64>,
}

pub(super) fn redis_config(
    mut raw: RawRedis,
    env: &impl Fn(&str) -> Option<String>,
    at: Origin<'_>,
) -> Result<RedisConfig, ConfigError> {
    let problem = |key: &str, m: String| at.invalid(format!("[redis] {key}"), m);
    if raw.url.is_some() && !raw.nodes.is_empty() {
        return Err(problem(
            "nodes",
            "give either url (one server) or nodes (a cluster), not both".into(),
        ));
    }
    if let Some(url) = env(env::REDIS_URL).filter(|u| !u.is_empty()) {
        raw.url = Some(url);
        raw.nodes.clear();
    }
    if let Some(nodes) = env(env::REDIS_NODES).filter(|n| !n.is_empty()) {
        raw.nodes = nodes.split(',').map(|s| s.trim().to_string()).collect();
        raw.url = None;
    }
    let endpoint = if raw.nodes.is_empty() {
        let url = raw.url.unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
        check_url(&url).map_err(|m| problem("url", m))?;
        if raw.cluster {
            Endpoint::Cluster(vec![url])
        } else {
            Endpoint::Single(url)
        }
    } else {
        for url in &raw.nodes {
            check_url(url).map_err(|m| problem("nodes", m))?;
        }
        Endpoint::Cluster(raw.nodes)
    };
    if raw.ca_file.is_some() {
        let plain = match &endpoint {
            Endpoint::Single(u) => !u.starts_with("rediss://"),
            Endpoint::Cluster(n) => n.iter().any(|u| !u.starts_with("rediss://")),
        };
        if plain {
            return Err(problem(
                "ca_file",
                "is only used with TLS: give rediss:// URLs".into(),
            ));
        }
    }
    let ms = |key: &str, v: Option<u64>, default: u64| match v.unwrap_or(default) {
        0 => Err(problem(key, "must be at least 1".into())),
        n => Ok(Duration::from_millis(n)),
    };
    Ok(RedisConfig {
        endpoint,
        username: env(env::REDIS_USERNAME).or(raw.username),
        password: env(env::REDIS_PASSWORD).or(raw.password),
        ca_file: raw.ca_file,
        connect_timeout: ms(
            "connect_timeout_ms",
            raw.connect_timeout_ms,
            DEFAULT_CONNECT_TIMEOUT_MS,
        )?,
        response_timeout: ms(
            "response_timeout_ms",
            raw.response_timeout_ms,
            DEFAULT_RESPONSE_TIMEOUT_MS,
        )?,
    })
}

fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err(format!(
            "{:?} must start with redis:// or rediss:// (TLS)",
            redact(url)
        ));
    }
    redis::Client::open(url)
        .map(drop)
        .map_err(|e| format!("{:?} is not a usable Redis URL: {e}", redact(url)))
}

/// A URL with any password replaced by `***`, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("rediss://:pw@h"), "rediss://:***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }
}
