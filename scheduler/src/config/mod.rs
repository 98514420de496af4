//! The scheduler's TOML config: Redis, the HTTP listener and the queues.
//! A queue's settings layer the shared defaults, then `[defaults]`, then its
//! own `[[queue]]` table. Parsing is apart from file I/O and from the
//! environment, so every rejection is testable.
//!
//! * [`redis`] — the `[redis]` section; [`queues`] — `[defaults]` and
//!   `[[queue]]`; [`env`] — the variables that override the file.

use std::net::SocketAddr;
use std::path::Path;

use queuegate_shared::{Prefix, Settings};
use serde::Deserialize;

mod admin;
mod beacon;
pub mod env;
mod queues;
mod redis;

pub use beacon::BeaconConfig;
pub use env::Environment;

pub use admin::{token_hash, AdminConfig, AdminToken, DEFAULT_ADMIN_LISTEN};

pub use queues::{check_settings, format_time, parse_time, FileSchedule, QueueConfig};
pub use redis::{redact, Endpoint, RedisConfig, DEFAULT_REDIS_URL, DEFAULT_RESPONSE_TIMEOUT_MS};

/// Where `run` and the operator commands look when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/queuegate/scheduler.toml";
/// `/healthz` and `/metrics` when the config names no listener.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

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

/// Where the text being parsed came from: every rejection names it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a>(&'a str);

impl Origin<'_> {
    pub(crate) fn invalid(
        self,
        place: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            origin: self.0.to_string(),
            place: place.into(),
            message: message.into(),
        }
    }
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
    /// The admin API (`[admin]`): off (None) unless a token is configured.
    pub admin: Option<AdminConfig>,
    /// The queues, in file order, ids unique.
    pub queues: Vec<QueueConfig>,
    /// The randomness beacon `schedule --beacon drand` names (`[beacon]`).
    pub beacon: Option<BeaconConfig>,
}

impl Config {
    /// Reads and validates `path`, with overrides from `env`.
    pub fn load(path: &Path, env: &env::Environment) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: origin.clone(),
            source,
        })?;
        let mut config = Config::parse(&text, &origin, |name| env.get(name))?;
        // A relative CA path is relative to the config file.
        if let Some(ca) = config.redis.ca_file.take() {
            let ca = path.parent().map_or(ca.clone(), |dir| dir.join(&ca));
            if let Err(e) = std::fs::metadata(&ca) {
                return Err(Origin(&origin).invalid(
                    "[redis] ca_file",
                    format!("cannot read {}: {e}", ca.display()),
                ));
            }
            config.redis.ca_file = Some(ca);
        }
        Ok(config)
    }

    /// The config from the environment alone (containers, managed
    /// platforms): Redis from `QUEUEGATE_REDIS_URL` (or `_NODES`, with
    /// `_USERNAME`, `_PASSWORD`), `QUEUEGATE_LISTEN`, one queue
    /// `QUEUEGATE_QUEUE` (default `main`) whose settings are
    /// `QUEUEGATE_<SETTING>` (`QUEUEGATE_ADMIT_RATE_PER_SECOND=50`),
    /// `QUEUEGATE_OPENS_AT`/`_CLOSES_AT`, `QUEUEGATE_KEY_PREFIX`, and the
    /// admin API from `QUEUEGATE_ADMIN_TOKENS` (`ops=sha256:…,bot=sha256:…`)
    /// and `QUEUEGATE_ADMIN_LISTEN`. Validated exactly like a file.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let origin = "the environment";
        let at = Origin(origin);
        if env(env::REDIS_URL).is_none() && env(env::REDIS_NODES).is_none() {
            return Err(at.invalid(
                env::REDIS_URL,
                "is not set: without a config file, QUEUEGATE_REDIS_URL (or QUEUEGATE_REDIS_NODES) names Redis",
            ));
        }
        // A setting's value as the file would write it; anything else is
        // a string (then refused by the setting's type, naming it).
        let value = |text: String| {
            toml::from_str::<toml::Table>(&format!("v = {}", text.trim()))
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(text.trim().to_string()))
        };
        let mut redis = toml::Table::new();
        if let Some(p) = env(env::KEY_PREFIX) {
            redis.insert("key_prefix".into(), toml::Value::String(p));
        }
        let mut queue = toml::Table::new();
        let id = env(env::QUEUE).unwrap_or_else(|| "main".into());
        queue.insert("id".into(), toml::Value::String(id));
        for name in Settings::field_names() {
            if let Some(text) = env(&env::setting_var(&name)) {
                queue.insert(name.clone(), value(text));
            }
        }
        for (var, key) in [(env::OPENS_AT, "opens_at"), (env::CLOSES_AT, "closes_at")] {
            if let Some(t) = env(var) {
                queue.insert(key.into(), toml::Value::String(t));
            }
        }
        let mut doc = toml::Table::new();
        doc.insert("redis".into(), toml::Value::Table(redis));
        if let Some(tokens) = env(env::ADMIN_TOKENS) {
            let mut table = toml::Table::new();
            for pair in tokens.split(',').filter(|p| !p.trim().is_empty()) {
                let (name, hash) = pair.split_once('=').ok_or_else(|| {
                    at.invalid(
                        env::ADMIN_TOKENS,
                        format!("{pair:?}: write name=sha256:<hex>, comma-separated"),
                    )
                })?;
                table.insert(name.trim().into(), toml::Value::String(hash.trim().into()));
            }
            let mut admin = toml::Table::new();
            admin.insert("tokens".into(), toml::Value::Table(table));
            doc.insert("admin".into(), toml::Value::Table(admin));
        }
        doc.insert(
            "queue".into(),
            toml::Value::Array(vec![toml::Value::Table(queue)]),
        );
        let text = toml::to_string(&doc).map_err(|e| at.invalid("environment", e.to_string()))?;
        Config::parse(&text, origin, env)
    }

    /// Queue settings in the environment while the config comes from a
    /// file: they would be ignored, so they are refused (a file and the
    /// environment never both set a queue's settings). URLs, secrets and
    /// listen addresses are the overrides of *Environment overrides*.
    pub fn refuse_env_settings(
        origin: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let mut vars: Vec<String> = Settings::field_names()
            .iter()
            .map(|n| env::setting_var(n))
            .collect();
        vars.extend(
            [
                env::QUEUE,
                env::ADMIN_TOKENS,
                env::KEY_PREFIX,
                env::OPENS_AT,
                env::CLOSES_AT,
            ]
            .map(String::from),
        );
        let set: Vec<String> = vars.into_iter().filter(|v| env(v).is_some()).collect();
        if set.is_empty() {
            return Ok(());
        }
        Err(Origin(origin).invalid(
            "environment",
            format!(
                "{} set, but the config comes from this file: put them in the file, \
                 or run without a file to configure from the environment alone",
                set.join(", ")
            ),
        ))
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
        let at = Origin(origin);
        let redis = redis::redis_config(raw.redis.clone(), &env, at)?;
        let prefix = match &raw.redis.key_prefix {
            Some(p) => Prefix::new(p)
                .map_err(|e| at.invalid("[redis] key_prefix", format!("{p:?}: {e}")))?,
            None => Prefix::default(),
        };
        let listen_text = env(env::LISTEN)
            .or(raw.http.listen.clone())
            .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen_text.parse().map_err(|_| {
            at.invalid(
                "[http] listen",
                format!("{listen_text:?} is not an address like \"127.0.0.1:9464\""),
            )
        })?;
        let queues = queues::queue_configs(&raw.defaults, &raw.queues, &redis, at)?;
        let admin = raw
            .admin
            .map(|a| admin::admin_config(a, &env, listen, at))
            .transpose()?;
        let beacon = raw
            .beacon
            .map(|b| beacon::beacon_config(b, at))
            .transpose()?;
        Ok(Config {
            origin: origin.to_string(),
            redis,
            prefix,
            listen,
            admin,
            queues,
            beacon,
        })
    }

    /// The configured queue with this id.
    pub fn queue(&self, id: &str) -> Option<&QueueConfig> {
        self.queues.iter().find(|q| q.id.as_str() == id)
    }

    /// What `new` changes that a running process cannot take over (a
    /// reload applies queues: new ones, their settings, removals), or
    /// None.
    pub fn restart_needed(&self, new: &Config) -> Option<&'static str> {
        let (a, b) = (&self.redis, &new.redis);
        let same_redis = a.endpoint == b.endpoint
            && a.username == b.username
            && a.password == b.password
            && a.ca_file == b.ca_file
            && a.connect_timeout == b.connect_timeout
            && a.response_timeout == b.response_timeout;
        if !same_redis || self.prefix != new.prefix {
            Some("the [redis] section changed")
        } else if self.listen != new.listen {
            Some("[http] listen changed")
        } else if self.admin != new.admin {
            Some("the [admin] section changed")
        } else {
            None
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    redis: redis::RawRedis,
    #[serde(default)]
    http: RawHttp,
    admin: Option<admin::RawAdmin>,
    beacon: Option<beacon::RawBeacon>,
    #[serde(default)]
    defaults: toml::Table,
    #[serde(default, rename = "queue")]
    queues: Vec<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    listen: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::Settings;

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
    fn the_environment_alone_configures_one_queue_checked_like_a_file() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let c = Config::from_env(vars(&[
            ("QUEUEGATE_REDIS_URL", "redis://r:6379"),
            ("QUEUEGATE_LISTEN", "0.0.0.0:9464"),
            ("QUEUEGATE_QUEUE", "drop-1"),
            ("QUEUEGATE_ADMIT_RATE_PER_SECOND", "50"),
            ("QUEUEGATE_IDLE_PASSTHROUGH", "false"),
            ("QUEUEGATE_OPENS_AT", "2026-12-24T18:00:00Z"),
            (
                "QUEUEGATE_ADMIN_TOKENS",
                "ops=sha256:3f1c0000000000000000000000000000000000000000000000000000000000aa",
            ),
        ]))
        .unwrap();
        assert_eq!(c.redis.endpoint, Endpoint::Single("redis://r:6379".into()));
        assert_eq!(c.listen.port(), 9464);
        assert_eq!(c.queues.len(), 1);
        let q = &c.queues[0];
        assert_eq!(q.id.as_str(), "drop-1");
        assert_eq!(q.settings.admit_rate_per_second, 50.0);
        assert!(!q.settings.idle_passthrough);
        assert_eq!(q.settings.max_active, Settings::default().max_active);
        assert!(q.schedule.opens_at.is_some());
        assert_eq!(c.admin.map(|a| a.tokens.len()), Some(1));

        for (pairs, want) in [
            (&[][..], "QUEUEGATE_REDIS_URL"),
            (
                &[
                    ("QUEUEGATE_REDIS_URL", "redis://r:1"),
                    ("QUEUEGATE_MAX_ACTIVE", "0"),
                ][..],
                "max_active = 0",
            ),
            (
                &[
                    ("QUEUEGATE_REDIS_URL", "redis://r:1"),
                    ("QUEUEGATE_MAX_ACTIVE", "lots"),
                ][..],
                "max_active",
            ),
            (
                &[
                    ("QUEUEGATE_REDIS_URL", "redis://r:1"),
                    ("QUEUEGATE_QUEUE", "Bad Id"),
                ][..],
                "Bad Id",
            ),
            (
                &[
                    ("QUEUEGATE_REDIS_URL", "redis://r:1"),
                    ("QUEUEGATE_ADMIN_TOKENS", "ops"),
                ][..],
                "QUEUEGATE_ADMIN_TOKENS",
            ),
        ] {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let e =
                Config::from_env(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
                    .unwrap_err()
                    .to_string();
            assert!(e.contains(want), "{pairs:?}: {e}");
        }
    }

    #[test]
    fn queue_settings_in_the_environment_are_refused_beside_a_file() {
        assert!(Config::refuse_env_settings("f.toml", |_| None).is_ok());
        let e = Config::refuse_env_settings("f.toml", |k| {
            (k == "QUEUEGATE_MAX_ACTIVE").then(|| "5".to_string())
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("f.toml") && e.contains("QUEUEGATE_MAX_ACTIVE"),
            "{e}"
        );
        // URLs and secrets are overrides, not queue settings.
        assert!(Config::refuse_env_settings("f.toml", |k| {
            (k == "QUEUEGATE_REDIS_URL").then(|| "redis://x:1".to_string())
        })
        .is_ok());
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
    fn a_queue_may_schedule_its_opening_and_closing() {
        let c = parse(
            "[[queue]]\nid = \"a\"\nopens_at = 2026-12-03T14:00:00Z\ncloses_at = \"2026-12-03T16:00:00+01:00\"\n[[queue]]\nid = \"b\"\n",
        )
        .unwrap();
        assert_eq!(
            c.queues[0].schedule,
            FileSchedule {
                opens_at: Some(parse_time("2026-12-03T14:00:00Z").unwrap()),
                closes_at: Some(parse_time("2026-12-03T15:00:00Z").unwrap()),
            }
        );
        assert!(!c.queues[1].schedule.is_set());
    }

    #[test]
    fn rejections_name_the_place_and_the_field() {
        let cases = [
            (
                "[[queue]]\nid = \"a\"\nopens_at = \"at noon\"\n",
                "queue \"a\": opens_at: \"at noon\" is not an RFC 3339 time",
            ),
            (
                "[[queue]]\nid = \"a\"\nopens_at = 2026-12-03T14:00:00\n",
                "queue \"a\": opens_at: \"2026-12-03T14:00:00\" is not an RFC 3339 time with an offset",
            ),
            (
                "[[queue]]\nid = \"a\"\nopens_at = 2026-12-03T14:00:00Z\ncloses_at = 2026-12-03T13:00:00Z\n",
                "queue \"a\": closes_at must be after opens_at",
            ),
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
        let got = err("[redis]\nurl = \"redis://u:pw@h:notaport\"\n[[queue]]\nid = \"a\"\n");
        assert!(!got.contains("pw"), "{got}");
    }
}
