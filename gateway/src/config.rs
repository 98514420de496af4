//! Settings of the gateway: command-line flags with environment fallbacks,
//! each default written once here, and the checks a setting must pass.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

use crate::error::StartError;

/// Default listen address: loopback only, so a dev gateway is never exposed.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8079";
/// Default Redis to front.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// Default request body cap (10 MB), the same order as Upstash's request limit.
pub const DEFAULT_MAX_BODY_BYTES: usize = 10 * 1024 * 1024;
/// Default bound on one Redis round trip, reconnects included.
pub const DEFAULT_REDIS_TIMEOUT_MS: u64 = 3_000;

/// `redis-rest`: an Upstash-compatible REST gateway in front of a redis-server.
///
/// Forms: `POST /` with a JSON array (`["SET","k","v"]`), `GET|POST /CMD/arg/...`,
/// `POST /pipeline` and `POST /multi-exec` with a JSON array of arrays.
/// Every request needs `Authorization: Bearer <token>` or `?_token=<token>`.
#[derive(Debug, Clone, Parser)]
#[command(name = "redis-rest", version, about, long_about = None)]
pub struct Cli {
    /// Address to listen on (port 0 picks a free port; the real one is printed).
    #[arg(long, env = "REDIS_REST_LISTEN", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// Redis to forward commands to (`redis://[user:pass@]host:port[/db]`).
    #[arg(long, env = "REDIS_URL", default_value = DEFAULT_REDIS_URL)]
    pub redis_url: String,

    /// Token every request must present (Bearer header or `_token` query).
    #[arg(long, env = "REDIS_REST_TOKEN", hide_env_values = true)]
    pub token: String,

    /// Largest accepted request body in bytes; larger bodies get 413.
    #[arg(long, env = "REDIS_REST_MAX_BODY_BYTES", default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,

    /// Bound on one Redis round trip in milliseconds; past it the request gets 504.
    #[arg(long, env = "REDIS_REST_TIMEOUT_MS", default_value_t = DEFAULT_REDIS_TIMEOUT_MS)]
    pub redis_timeout_ms: u64,

    /// A request quota like an Upstash plan's (0: none): after this many
    /// requests every further one is refused with Upstash's own
    /// `ERR max requests limit exceeded`, to rehearse what the edge does
    /// when a database's quota runs out.
    #[arg(long, env = "REDIS_REST_MAX_REQUESTS", default_value_t = 0)]
    pub max_requests: u64,

    /// Tests only: `<sha1>:<ms>:<count>` holds the reply of the next
    /// `count` `EVALSHA <sha1>` calls for `ms` after Redis ran them, to
    /// rehearse a reply lost after the script ran. Never for production.
    #[arg(long, env = "REDIS_REST_FAULT_DELAY_REPLY", hide = true)]
    pub fault_delay_reply: Option<String>,
}

/// A test-only fault: the reply of the next `count` runs of one script
/// (by SHA1) is held `delay` after Redis ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyDelay {
    /// The script's SHA1, lowercase hex.
    pub sha1: String,
    /// How long each reply is held.
    pub delay: Duration,
    /// How many replies are held.
    pub count: u64,
}

impl ReplyDelay {
    /// Parses `<sha1>:<ms>:<count>`.
    pub fn parse(text: &str) -> Result<ReplyDelay, StartError> {
        let bad = || {
            StartError::Config("--fault-delay-reply must be <sha1 (40 hex)>:<ms>:<count>".into())
        };
        let mut parts = text.split(':');
        let (Some(sha1), Some(ms), Some(count), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        if sha1.len() != 40 || !sha1.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(ReplyDelay {
            sha1: sha1.to_ascii_lowercase(),
            delay: Duration::from_millis(ms.parse().map_err(|_| bad())?),
            count: count.parse().map_err(|_| bad())?,
        })
    }
}

/// The validated settings [`crate::run`] needs.
#[derive(Clone)]
pub struct Config {
    /// Redis URL (may hold a password: never logged).
    pub redis_url: String,
    /// The shared secret clients must present.
    pub token: String,
    /// Request body cap in bytes.
    pub max_body_bytes: usize,
    /// Bound on one Redis round trip.
    pub redis_timeout: Duration,
    /// Requests served before the quota refuses (0: no quota).
    pub max_requests: u64,
    /// Tests only: replies to hold back (see [`ReplyDelay`]).
    pub fault_delay_reply: Option<ReplyDelay>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token and the URL (which may carry a password) stay out of logs.
        f.debug_struct("Config")
            .field("redis_url", &"<redacted>")
            .field("token", &"<redacted>")
            .field("max_body_bytes", &self.max_body_bytes)
            .field("redis_timeout", &self.redis_timeout)
            .field("max_requests", &self.max_requests)
            .field("fault_delay_reply", &self.fault_delay_reply)
            .finish()
    }
}

impl Config {
    /// A config with every default and the given token.
    pub fn new(token: impl Into<String>) -> Config {
        Config {
            redis_url: DEFAULT_REDIS_URL.to_string(),
            token: token.into(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            redis_timeout: Duration::from_millis(DEFAULT_REDIS_TIMEOUT_MS),
            max_requests: 0,
            fault_delay_reply: None,
        }
    }

    /// Rejects settings the gateway cannot run with.
    pub fn validate(&self) -> Result<(), StartError> {
        if self.token.trim().is_empty() {
            return Err(StartError::Config("the token must not be empty".into()));
        }
        if self.max_body_bytes == 0 {
            return Err(StartError::Config(
                "--max-body-bytes must be at least 1".into(),
            ));
        }
        if self.redis_timeout.is_zero() {
            return Err(StartError::Config(
                "--redis-timeout-ms must be at least 1".into(),
            ));
        }
        redis::Client::open(self.redis_url.as_str())
            .map(|_| ())
            .map_err(|e| StartError::Config(format!("invalid --redis-url: {e}")))
    }
}

impl Cli {
    /// The listen address and the validated config.
    pub fn into_config(self) -> Result<(SocketAddr, Config), StartError> {
        let config = Config {
            redis_url: self.redis_url,
            token: self.token,
            max_body_bytes: self.max_body_bytes,
            redis_timeout: Duration::from_millis(self.redis_timeout_ms),
            max_requests: self.max_requests,
            fault_delay_reply: self
                .fault_delay_reply
                .as_deref()
                .map(ReplyDelay::parse)
                .transpose()?,
        };
        config.validate()?;
        Ok((self.listen, config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Config::new("t").validate().unwrap();
    }

    #[test]
    fn rejects_empty_token_zero_limits_and_bad_url() {
        assert!(Config::new("  ").validate().is_err());
        let mut c = Config::new("t");
        c.max_body_bytes = 0;
        assert!(c.validate().is_err());
        let mut c = Config::new("t");
        c.redis_timeout = Duration::ZERO;
        assert!(c.validate().is_err());
        let mut c = Config::new("t");
        c.redis_url = "http://nope".into();
        assert!(c.validate().is_err());
    }

    #[test]
    fn flags_parse_with_defaults() {
        let cli = Cli::try_parse_from(["redis-rest", "--token", "s3cret"]).unwrap();
        let (listen, config) = cli.into_config().unwrap();
        assert_eq!(listen.to_string(), DEFAULT_LISTEN);
        assert_eq!(config.max_body_bytes, DEFAULT_MAX_BODY_BYTES);
        assert_eq!(config.max_requests, 0, "no quota unless asked");
        assert!(!format!("{config:?}").contains("s3cret"));
        assert_eq!(config.fault_delay_reply, None, "no fault unless asked");
    }

    #[test]
    fn the_test_fault_parses_or_refuses_to_start() {
        let sha = "A".repeat(40);
        let cli = Cli::try_parse_from([
            "redis-rest",
            "--token",
            "t",
            "--fault-delay-reply",
            &format!("{sha}:1500:2"),
        ])
        .unwrap();
        let (_, config) = cli.into_config().unwrap();
        assert_eq!(
            config.fault_delay_reply,
            Some(ReplyDelay {
                sha1: "a".repeat(40),
                delay: Duration::from_millis(1500),
                count: 2
            })
        );
        for bad in [
            "",
            "abc:1:1",
            &format!("{sha}:x:1"),
            &format!("{sha}:1"),
            &format!("{sha}:1:1:1"),
        ] {
            assert!(ReplyDelay::parse(bad).is_err(), "{bad}");
        }
    }
}
