//! The entry guard's settings at the edge: whether a new place needs a
//! proof-of-work solution, the challenge key, and Turnstile. The budget and
//! the difficulty are per-queue settings the scheduler publishes.

use super::{err, millis, ConfigError, IdentityMode};

/// Default of `TURNSTILE_VERIFY_URL`: Cloudflare's documented endpoint.
pub const TURNSTILE_SITEVERIFY: &str = "https://challenges.cloudflare.com/turnstile/v0/siteverify";
/// Default of `TURNSTILE_SCRIPT_URL`: the widget's script, explicit
/// rendering (the page renders it when the edge asks for a check).
pub const TURNSTILE_SCRIPT: &str = "https://challenges.cloudflare.com/turnstile/v0/api.js";
/// Where Turnstile lives; the page's CSP allows scripts and frames from
/// here only.
const TURNSTILE_ORIGIN: &str = "https://challenges.cloudflare.com";

/// A `TURNSTILE_*_URL` override: Cloudflare's own host, or a stand-in on
/// loopback for tests. Anything else is refused, so a wrong value can
/// neither send the secret key elsewhere nor load a script from elsewhere.
fn turnstile_url(name: &'static str, value: String) -> Result<String, ConfigError> {
    let loopback = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
    let official = value.starts_with(&format!("{TURNSTILE_ORIGIN}/"));
    let local = loopback.iter().any(|p| {
        value.strip_prefix(p).is_some_and(|rest| {
            let (port, path) = rest.split_once('/').unwrap_or((rest, ""));
            !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit())
                && !path.contains(['"', '\'', ' ', ';'])
        })
    });
    if (official || local) && !value.contains(['"', '\'', ' ', ';', ',']) {
        Ok(value)
    } else {
        Err(err(
            name,
            "must be on https://challenges.cloudflare.com (or, for tests, a loopback http://127.0.0.1:PORT stand-in)",
        ))
    }
}

/// `ENTRY_CHALLENGE` when unset: on for anonymous visitors (the page solves
/// the challenge in a Web Worker), off for JWT ones.
pub const DEFAULT_CHALLENGE: &str = "auto";

/// What a new place must pass at the edge.
#[derive(Clone, PartialEq, Eq)]
pub struct GuardConfig {
    /// A new place needs an ALTCHA solution.
    pub challenge: bool,
    /// HMAC key of the challenges (`CHALLENGE_SECRET`, or one derived from
    /// `ORIGIN_SIGNING_SECRET`).
    pub challenge_secret: Vec<u8>,
    /// Turnstile, when its secret is set.
    pub turnstile: Option<TurnstileConfig>,
}

/// Cloudflare Turnstile's server-side check.
#[derive(Clone, PartialEq, Eq)]
pub struct TurnstileConfig {
    /// `TURNSTILE_SECRET_KEY` (a secret).
    pub secret: String,
    /// `TURNSTILE_SITE_KEY`, rendered into the page's widget.
    pub site_key: String,
    /// The siteverify URL (configurable for a local stand-in in tests).
    pub verify_url: String,
    /// The widget's script (configurable for a local stand-in in tests).
    pub script_url: String,
    /// Longest wait for siteverify.
    pub timeout_ms: u64,
    /// Admit when siteverify cannot be reached (`TURNSTILE_FAIL=open`);
    /// the default refuses (fail closed) and the budget still applies.
    pub fail_open: bool,
}

impl TurnstileConfig {
    /// The origin (scheme, host, port) of the widget's script: what the
    /// page's CSP allows for scripts and frames.
    pub fn script_origin(&self) -> &str {
        let after = self.script_url.find("://").map_or(0, |i| i + 3);
        let end = self.script_url[after..]
            .find('/')
            .map_or(self.script_url.len(), |i| after + i);
        &self.script_url[..end]
    }
}

impl std::fmt::Debug for GuardConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardConfig")
            .field("challenge", &self.challenge)
            .field("turnstile", &self.turnstile.as_ref().map(|t| &t.verify_url))
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TurnstileConfig {
    // The secret stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnstileConfig")
            .field("site_key", &self.site_key)
            .field("verify_url", &self.verify_url)
            .field("script_url", &self.script_url)
            .field("timeout_ms", &self.timeout_ms)
            .field("fail_open", &self.fail_open)
            .finish_non_exhaustive()
    }
}

impl GuardConfig {
    /// Reads `ENTRY_CHALLENGE` (`auto`: on for anonymous visitors, off for
    /// JWT ones, who hold one place per account already, the default; `on`;
    /// `off`),
    /// `CHALLENGE_SECRET` and the `TURNSTILE_*` variables.
    pub fn from_lookup(
        get: &impl Fn(&str) -> Option<String>,
        identity: &IdentityMode,
        origin_secret: &[u8],
    ) -> Result<GuardConfig, ConfigError> {
        let text = |name: &str| super::var(get, name);
        let challenge = match text("ENTRY_CHALLENGE")
            .as_deref()
            .unwrap_or(DEFAULT_CHALLENGE)
        {
            "auto" => matches!(identity, IdentityMode::Anonymous { .. }),
            "on" => true,
            "off" => false,
            other => {
                return Err(err(
                    "ENTRY_CHALLENGE",
                    format!("{other:?}: use \"auto\", \"on\" or \"off\""),
                ))
            }
        };
        let challenge_secret = match text("CHALLENGE_SECRET") {
            Some(s) if s.len() < super::MIN_SECRET_LEN => {
                return Err(err(
                    "CHALLENGE_SECRET",
                    format!("must be at least {} bytes", super::MIN_SECRET_LEN),
                ))
            }
            Some(s) => s.into_bytes(),
            None => queuegate_edge::signing::derive_key(origin_secret, "queuegate challenge v1"),
        };
        let turnstile = match (text("TURNSTILE_SECRET_KEY"), text("TURNSTILE_SITE_KEY")) {
            (None, None) => None,
            (Some(secret), Some(site_key)) => Some(TurnstileConfig {
                secret,
                site_key,
                verify_url: turnstile_url(
                    "TURNSTILE_VERIFY_URL",
                    text("TURNSTILE_VERIFY_URL")
                        .unwrap_or_else(|| TURNSTILE_SITEVERIFY.to_string()),
                )?,
                script_url: turnstile_url(
                    "TURNSTILE_SCRIPT_URL",
                    text("TURNSTILE_SCRIPT_URL").unwrap_or_else(|| TURNSTILE_SCRIPT.to_string()),
                )?,
                timeout_ms: millis(
                    "TURNSTILE_TIMEOUT_MS",
                    text("TURNSTILE_TIMEOUT_MS").as_deref().unwrap_or("3000"),
                    100..=10_000,
                )?,
                fail_open: match text("TURNSTILE_FAIL").as_deref().unwrap_or("closed") {
                    "closed" => false,
                    "open" => true,
                    _ => return Err(err("TURNSTILE_FAIL", "must be closed or open")),
                },
            }),
            (Some(_), None) => {
                return Err(err(
                    "TURNSTILE_SITE_KEY",
                    "is needed with TURNSTILE_SECRET_KEY",
                ))
            }
            (None, Some(_)) => {
                return Err(err(
                    "TURNSTILE_SECRET_KEY",
                    "is needed with TURNSTILE_SITE_KEY",
                ))
            }
        };
        Ok(GuardConfig {
            challenge,
            challenge_secret,
            turnstile,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turnstile_urls_stay_on_cloudflare_or_a_loopback_stand_in() {
        for ok in [
            TURNSTILE_SITEVERIFY,
            TURNSTILE_SCRIPT,
            "http://127.0.0.1:9000/siteverify",
            "http://localhost:1/api.js",
            "http://[::1]:80/x",
        ] {
            assert_eq!(turnstile_url("X", ok.into()).as_deref(), Ok(ok));
        }
        for bad in [
            "https://evil.example/api.js",
            "https://challenges.cloudflare.com.evil.example/api.js",
            "http://challenges.cloudflare.com/api.js",
            "http://127.0.0.1.evil.example:80/x",
            "http://127.0.0.1:/x",
            "http://10.0.0.1:80/x",
            "http://127.0.0.1:80/x; script-src *",
            "https://challenges.cloudflare.com/x 'unsafe-inline'",
        ] {
            assert!(turnstile_url("X", bad.into()).is_err(), "{bad}");
        }
    }
}
