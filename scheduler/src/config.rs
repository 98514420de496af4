//! The scheduler's TOML config: Redis, the HTTP listener and the queues.
//! A queue's settings layer the shared defaults, then `[defaults]`, then its
//! own `[[queue]]` table. Parsing is apart from file I/O and from the
//! environment, so every rejection is testable.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use queuegate_shared::{Prefix, QueueId, Settings};
use serde::Deserialize;

/// Where `run` and the operator commands look when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/queuegate/scheduler.toml";
/// Redis when the config names none.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// `/healthz` and `/metrics` when the config names no listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";
const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 1_000;
const DEFAULT_RESPONSE_TIMEOUT_MS: u64 = 500;
/// Most admissions one tick may be configured for: a batch of 1,000 costs
/// Redis ~10–25 ms (docs/benchmarks/scheduler.md), so this keeps one
/// script well under the response timeout.
const MAX_ADMITS_PER_TICK: f64 = 5_000.0;

/// Environment variables that override the file (URLs and secrets stay out
/// of a file that is often world-readable or committed).
pub mod env {
    /// Replaces `[redis] url` (and clears `nodes`).
    pub const REDIS_URL: &str = "QUEUEGATE_REDIS_URL";
    /// Replaces `[redis] nodes`: comma-separated URLs (and clears `url`).
    pub const REDIS_NODES: &str = "QUEUEGATE_REDIS_NODES";
    /// Replaces `[redis] username`.
    pub const REDIS_USERNAME: &str = "QUEUEGATE_REDIS_USERNAME";
    /// Replaces `[redis] password`.
    pub const REDIS_PASSWORD: &str = "QUEUEGATE_REDIS_PASSWORD";
    /// Replaces `[http] listen`.
    pub const LISTEN: &str = "QUEUEGATE_LISTEN";
    /// The config file, when `--config` is not given.
    pub const CONFIG: &str = "QUEUEGATE_CONFIG";
}

/// A config that cannot be used, with where and what to change.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// Not TOML, or a key of the wrong type or unknown (toml names line and key).
    #[error("{origin}: {message}")]
    Syntax {
        /// File name (or `<text>`).
        origin: String,
        /// The parser's message.
        message: String,
    },
    /// A value the scheduler cannot work with.
    #[error("{origin}: {place}: {message}")]
    Invalid {
        /// File name (or `<text>`).
        origin: String,
        /// Section and key, e.g. `queue "main"` or `[redis] url`.
        place: String,
        /// What is wrong and what is allowed.
        message: String,
    },
}

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

/// One queue this process schedules.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue id (its keys' hash tag).
    pub id: QueueId,
    /// Its validated effective settings.
    pub settings: Settings,
}

/// The whole validated config.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the config came from, for messages.
    pub origin: String,
    /// Redis.
    pub redis: RedisConfig,
    /// Key prefix of every queue.
    pub prefix: Prefix,
    /// `/healthz` and `/metrics`.
    pub listen: SocketAddr,
    /// The queues, in file order, ids unique.
    pub queues: Vec<QueueConfig>,
}

impl Config {
    /// Reads and validates `path`, with overrides from the process env.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: origin.clone(),
            source,
        })?;
        let mut config = Config::parse(&text, &origin, |name| std::env::var(name).ok())?;
        // A relative CA path is relative to the config file.
        if let Some(ca) = config.redis.ca_file.take() {
            let ca = path.parent().map_or(ca.clone(), |dir| dir.join(&ca));
            if let Err(e) = std::fs::metadata(&ca) {
                return Err(ConfigError::Invalid {
                    origin,
                    place: "[redis] ca_file".into(),
                    message: format!("cannot read {}: {e}", ca.display()),
                });
            }
            config.redis.ca_file = Some(ca);
        }
        Ok(config)
    }

    /// Parses and validates `text`; `env` looks up override variables.
    pub fn parse(
        text: &str,
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |place: &str, message: String| ConfigError::Invalid {
            origin: origin.to_string(),
            place: place.to_string(),
            message,
        };
        let redis = redis_config(raw.redis.clone(), &env).map_err(|(p, m)| invalid(&p, m))?;
        let prefix = match &raw.redis.key_prefix {
            Some(p) => {
                Prefix::new(p).map_err(|e| invalid("[redis] key_prefix", format!("{p:?}: {e}")))?
            }
            None => Prefix::default(),
        };
        let listen_text = env(env::LISTEN)
            .or(raw.http.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen_text.parse().map_err(|_| {
            invalid(
                "[http] listen",
                format!("{listen_text:?} is not an address like \"127.0.0.1:9464\""),
            )
        })?;

        if raw.queues.is_empty() {
            return Err(invalid(
                "[[queue]]",
                "no queue configured; add one, e.g. [[queue]] id = \"main\"".into(),
            ));
        }
        let defaults = overrides(&raw.defaults).map_err(|m| invalid("[defaults]", m))?;
        let mut queues: Vec<QueueConfig> = Vec::new();
        for (index, table) in raw.queues.iter().enumerate() {
            let queue = queue_config(table, &defaults, &redis).map_err(|(place, m)| {
                invalid(&place.unwrap_or(format!("[[queue]] #{}", index + 1)), m)
            })?;
            if queues.iter().any(|q| q.id == queue.id) {
                return Err(invalid(
                    &format!("queue \"{}\"", queue.id),
                    "configured twice; each [[queue]] id must be unique".into(),
                ));
            }
            queues.push(queue);
        }
        Ok(Config {
            origin: origin.to_string(),
            redis,
            prefix,
            listen,
            queues,
        })
    }

    /// The configured queue with this id.
    pub fn queue(&self, id: &str) -> Option<&QueueConfig> {
        self.queues.iter().find(|q| q.id.as_str() == id)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    redis: RawRedis,
    #[serde(default)]
    http: RawHttp,
    #[serde(default)]
    defaults: toml::Table,
    #[serde(default, rename = "queue")]
    queues: Vec<toml::Table>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRedis {
    url: Option<String>,
    #[serde(default)]
    nodes: Vec<String>,
    #[serde(default)]
    cluster: bool,
    key_prefix: Option<String>,
    username: Option<String>,
    password: Option<String>,
    ca_file: Option<PathBuf>,
    connect_timeout_ms: Option<u64>,
    response_timeout_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: Option<String>,
}

type Problem = (String, String);

fn redis_config(
    mut raw: RawRedis,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<RedisConfig, Problem> {
    let problem = |key: &str, m: String| (format!("[redis] {key}"), m);
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

/// Setting overrides from a table: every key must name a setting.
fn overrides(table: &toml::Table) -> Result<toml::Table, String> {
    let known = Settings::field_names();
    for key in table.keys() {
        if !known.contains(key) {
            return Err(format!(
                "unknown setting `{key}`; settings are: {}",
                known.join(", ")
            ));
        }
    }
    Ok(table.clone())
}

fn queue_config(
    table: &toml::Table,
    defaults: &toml::Table,
    redis: &RedisConfig,
) -> Result<QueueConfig, (Option<String>, String)> {
    let id_text = match table.get("id") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(other) => return Err((None, format!("id = {other}: must be a string"))),
        None => return Err((None, "id is missing, e.g. id = \"main\"".into())),
    };
    let id = QueueId::new(&id_text).map_err(|e| (None, format!("id = {id_text:?}: {e}")))?;
    let place = Some(format!("queue \"{id}\""));
    let mut own = table.clone();
    own.remove("id");
    let own = overrides(&own).map_err(|m| (place.clone(), m))?;

    let settings = merged_settings(defaults, &own).map_err(|m| (place.clone(), m))?;
    settings
        .validate()
        .map_err(|e| (place.clone(), e.to_string()))?;
    let per_tick = settings.admit_rate_per_second * settings.tick_ms as f64 / 1000.0;
    if per_tick > MAX_ADMITS_PER_TICK {
        return Err((
            place,
            format!(
                "admit_rate_per_second × tick_ms = {per_tick:.0} admissions per tick: at most \
                 {MAX_ADMITS_PER_TICK:.0} (one admit script blocks Redis while it runs); \
                 lower tick_ms"
            ),
        ));
    }
    let needed = settings.tick_ms + 2 * as_ms(redis.response_timeout);
    if settings.lease_ttl_ms <= needed {
        return Err((
            place,
            format!(
                "lease_ttl_ms = {}: must exceed tick_ms + 2 × [redis] response_timeout_ms \
                 ({} + 2 × {} = {needed}), the longest gap between two renewals",
                settings.lease_ttl_ms,
                settings.tick_ms,
                as_ms(redis.response_timeout)
            ),
        ));
    }
    Ok(QueueConfig { id, settings })
}

fn as_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Shared defaults ← `[defaults]` ← the queue's own keys. A type error is
/// pinned on the key that causes it by trying the keys one at a time.
fn merged_settings(defaults: &toml::Table, own: &toml::Table) -> Result<Settings, String> {
    let mut merged = defaults.clone();
    merged.extend(own.clone());
    match Settings::deserialize(toml::Value::Table(merged.clone())) {
        Ok(s) => Ok(s),
        Err(whole) => {
            for (key, value) in &merged {
                let single = toml::Table::from_iter([(key.clone(), value.clone())]);
                if let Err(e) = Settings::deserialize(toml::Value::Table(single)) {
                    return Err(format!("{key} = {value}: {e}"));
                }
            }
            Err(whole.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "test.toml", |_| None)
    }

    fn err(text: &str) -> String {
        parse(text)
            .expect_err("config should be rejected")
            .to_string()
    }

    #[test]
    fn a_minimal_config_takes_the_defaults() {
        let c = parse("[[queue]]\nid = \"main\"\n").unwrap();
        assert_eq!(c.redis.endpoint, Endpoint::Single(DEFAULT_REDIS_URL.into()));
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(c.queues.len(), 1);
        assert_eq!(c.queues[0].settings, Settings::default());
    }

    #[test]
    fn queue_settings_layer_over_defaults() {
        let c = parse(
            r#"
            [redis]
            url = "redis://127.0.0.1:7000"
            key_prefix = "shop"
            [http]
            listen = "0.0.0.0:9000"
            [defaults]
            admit_rate_per_second = 50
            max_active = 10
            [[queue]]
            id = "main"
            [[queue]]
            id = "vip"
            admit_rate_per_second = 12.5
            "#,
        )
        .unwrap();
        assert_eq!(c.queues[0].settings.admit_rate_per_second, 50.0);
        assert_eq!(c.queues[1].settings.admit_rate_per_second, 12.5);
        assert_eq!(c.queues[1].settings.max_active, 10);
        assert_eq!(c.listen.port(), 9000);
        assert_eq!(c.prefix, Prefix::new("shop").unwrap());
    }

    #[test]
    fn env_overrides_urls_and_secrets() {
        let env = |k: &str| match k {
            env::REDIS_NODES => Some("redis://a:1, redis://b:2".to_string()),
            env::REDIS_PASSWORD => Some("s3cret".to_string()),
            env::LISTEN => Some("127.0.0.1:1234".to_string()),
            _ => None,
        };
        let c = Config::parse(
            "[redis]\nurl = \"redis://x:1\"\n[[queue]]\nid = \"q\"\n",
            "t",
            env,
        )
        .unwrap();
        assert_eq!(
            c.redis.endpoint,
            Endpoint::Cluster(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        assert_eq!(c.redis.password.as_deref(), Some("s3cret"));
        assert!(!format!("{:?}", c.redis).contains("s3cret"));
        assert_eq!(c.listen.port(), 1234);
    }

    #[test]
    fn cluster_from_a_flag_or_nodes() {
        let c = parse("[redis]\nurl = \"redis://h:1\"\ncluster = true\n[[queue]]\nid = \"q\"\n")
            .unwrap();
        assert_eq!(
            c.redis.endpoint,
            Endpoint::Cluster(vec!["redis://h:1".into()])
        );
        let c = parse("[redis]\nnodes = [\"rediss://h:1\"]\n[[queue]]\nid = \"q\"\n").unwrap();
        assert!(matches!(c.redis.endpoint, Endpoint::Cluster(_)));
    }

    #[test]
    fn rejections_name_the_place_and_the_field() {
        let cases = [
            (
                "[[queue]]\nid = \"Main\"\n",
                "test.toml: [[queue]] #1: id = \"Main\"",
            ),
            ("[[queue]]\nmax_active = 1\n", "[[queue]] #1: id is missing"),
            (
                "[[queue]]\nid = \"a\"\nmax_activ = 1\n",
                "queue \"a\": unknown setting `max_activ`",
            ),
            (
                "[[queue]]\nid = \"a\"\nmax_active = 0\n",
                "queue \"a\": max_active = 0",
            ),
            (
                "[[queue]]\nid = \"a\"\nmax_active = \"lots\"\n",
                "queue \"a\": max_active = \"lots\"",
            ),
            (
                "[[queue]]\nid = \"a\"\n[[queue]]\nid = \"a\"\n",
                "queue \"a\": configured twice",
            ),
            (
                "[[queue]]\nid = \"a\"\nadmit_rate_per_second = 100000\n",
                "queue \"a\": admit_rate_per_second × tick_ms = 10000 admissions per tick",
            ),
            (
                "[[queue]]\nid = \"a\"\nlease_ttl_ms = 1000\n",
                "queue \"a\": lease_ttl_ms = 1000: must exceed",
            ),
            (
                "[defaults]\nfoo = 1\n[[queue]]\nid = \"a\"\n",
                "[defaults]: unknown setting `foo`",
            ),
            ("", "[[queue]]: no queue configured"),
            (
                "[redis]\nurl = \"http://x\"\n[[queue]]\nid = \"a\"\n",
                "[redis] url: \"http://x\" must start with",
            ),
            (
                "[redis]\nurl = \"redis://a\"\nnodes = [\"redis://b\"]\n[[queue]]\nid = \"a\"\n",
                "[redis] nodes: give either",
            ),
            (
                "[redis]\nkey_prefix = \"a{b\"\n[[queue]]\nid = \"a\"\n",
                "[redis] key_prefix",
            ),
            (
                "[http]\nlisten = \"nope\"\n[[queue]]\nid = \"a\"\n",
                "[http] listen",
            ),
            ("[redis]\nurll = \"x\"\n", "unknown field `urll`"),
            ("[[queue]\n", "test.toml: "),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert!(got.contains(want), "{text:?}\n got: {got}\nwant: {want}");
        }
    }

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(redact("redis://u:pw@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact("rediss://:pw@h"), "rediss://:***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
        let got = err("[redis]\nurl = \"redis://u:pw@h:notaport\"\n[[queue]]\nid = \"a\"\n");
        assert!(!got.contains("pw"), "{got}");
    }
}
