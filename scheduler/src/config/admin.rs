//! The `[admin]` section: where the admin API listens and the tokens it
//! takes. Each token is kept as its SHA-256 only (`sha256:<hex>`), under a
//! name that the audit log and metrics show; `queuegate-scheduler
//! admin-token NAME` makes one. Without a token there is no admin API.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::{env, ConfigError, Origin};

/// Where the admin API listens when `[admin]` names no address: beside
/// `/metrics` (9464), on loopback.
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:9465";

/// The admin API's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminConfig {
    /// Its own listener, apart from `/healthz` and `/metrics`.
    pub listen: SocketAddr,
    /// The tokens it accepts, at least one.
    pub tokens: Vec<AdminToken>,
}

/// One admin token: its name and its SHA-256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminToken {
    /// Who uses it (audit log, metrics): `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// SHA-256 of the token.
    pub sha256: [u8; 32],
}

impl AdminConfig {
    /// The name of the token `presented` is, comparing every configured
    /// hash in constant time.
    pub fn who(&self, presented: &str) -> Option<&str> {
        use subtle::ConstantTimeEq;
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        let mut found = None;
        for t in &self.tokens {
            if bool::from(t.sha256.ct_eq(&digest)) {
                found = Some(t.name.as_str());
            }
        }
        found
    }
}

/// `sha256:<hex>` of `token`, as the config keeps it.
pub fn token_hash(token: &str) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(token.as_bytes())))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdmin {
    listen: Option<String>,
    #[serde(default)]
    tokens: BTreeMap<String, String>,
}

pub(super) fn admin_config(
    raw: RawAdmin,
    env_var: &impl Fn(&str) -> Option<String>,
    http: SocketAddr,
    at: Origin<'_>,
) -> Result<AdminConfig, ConfigError> {
    let listen_text = env_var(env::ADMIN_LISTEN)
        .or(raw.listen)
        .unwrap_or_else(|| DEFAULT_ADMIN_LISTEN.to_string());
    let listen: SocketAddr = listen_text.parse().map_err(|_| {
        at.invalid(
            "[admin] listen",
            format!("{listen_text:?} is not an address like \"{DEFAULT_ADMIN_LISTEN}\""),
        )
    })?;
    if listen == http {
        return Err(at.invalid(
            "[admin] listen",
            format!("{listen} is [http] listen too: the admin API has its own address"),
        ));
    }
    if raw.tokens.is_empty() {
        return Err(at.invalid(
            "[admin] tokens",
            "no token: add one (`queuegate-scheduler admin-token NAME` prints it) or remove [admin]",
        ));
    }
    let mut tokens = Vec::new();
    for (name, hash) in raw.tokens {
        let place = format!("[admin] tokens.{name}");
        let name_ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !name_ok {
            return Err(at.invalid(place, "a token's name is 1-64 of A-Z a-z 0-9 _ . -"));
        }
        let sha256 = hash
            .strip_prefix("sha256:")
            .and_then(|h| hex::decode(h).ok())
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| {
                at.invalid(
                    &place,
                    "not \"sha256:<64 hex digits>\": the config keeps a token's hash, never the token (`queuegate-scheduler admin-token NAME`)",
                )
            })?;
        if tokens.iter().any(|t: &AdminToken| t.sha256 == sha256) {
            return Err(at.invalid(place, "the same token under two names"));
        }
        tokens.push(AdminToken { name, sha256 });
    }
    Ok(AdminConfig { listen, tokens })
}

#[cfg(test)]
mod tests {
    use super::super::Config;
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, "test.toml", |_| None)
    }

    const QUEUE: &str = "[[queue]]\nid = \"main\"\n";

    #[test]
    fn the_admin_api_is_off_without_the_section_and_needs_a_token_with_it() {
        assert_eq!(parse(QUEUE).unwrap().admin, None);
        let err = parse(&format!("{QUEUE}[admin]\n")).unwrap_err().to_string();
        assert!(err.contains("[admin] tokens: no token"), "{err}");
    }

    #[test]
    fn tokens_are_kept_as_hashes_and_recognised_by_name() {
        let hash = token_hash("qga_secret-one");
        let c = parse(&format!(
            "{QUEUE}[admin]\nlisten = \"127.0.0.1:9999\"\ntokens = {{ ops = \"{hash}\", bot = \"{}\" }}\n",
            token_hash("qga_secret-two")
        ))
        .unwrap();
        let admin = c.admin.unwrap();
        assert_eq!(admin.listen.port(), 9999);
        assert_eq!(admin.who("qga_secret-one"), Some("ops"));
        assert_eq!(admin.who("qga_secret-two"), Some("bot"));
        assert_eq!(admin.who("qga_secret-thre"), None);
        assert_eq!(admin.who(""), None);
    }

    #[test]
    fn bad_admin_settings_are_refused_with_the_place() {
        let hash = token_hash("x");
        for (section, needle) in [
            (
                "tokens = { ops = \"qga_plaintext\" }".to_string(),
                "never the token",
            ),
            (
                format!("tokens = {{ \"a b\" = \"{hash}\" }}"),
                "token's name",
            ),
            (
                format!("tokens = {{ a = \"{hash}\", b = \"{hash}\" }}"),
                "two names",
            ),
            (
                format!("listen = \"127.0.0.1:9464\"\ntokens = {{ a = \"{hash}\" }}"),
                "its own address",
            ),
            (
                format!("listen = \"nowhere\"\ntokens = {{ a = \"{hash}\" }}"),
                "is not an address",
            ),
            (format!("token = {{ a = \"{hash}\" }}"), "unknown field"),
        ] {
            let err = parse(&format!("{QUEUE}[admin]\n{section}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{section}: {err}");
        }
    }

    #[test]
    fn a_reload_that_changes_the_admin_section_needs_a_restart() {
        let with = |name: &str| {
            parse(&format!(
                "{QUEUE}max_active = 7\n[admin]\ntokens = {{ {name} = \"{}\" }}\n",
                token_hash(name)
            ))
            .unwrap()
        };
        let running = with("ops");
        let settings_only = parse(&format!(
            "{QUEUE}max_active = 8\n[admin]\ntokens = {{ ops = \"{}\" }}\n",
            token_hash("ops")
        ))
        .unwrap();
        assert_eq!(running.restart_needed(&settings_only), None);
        assert_eq!(
            running.restart_needed(&with("other")),
            Some("the [admin] section changed")
        );
        assert_eq!(
            running.restart_needed(&parse(QUEUE).unwrap()),
            Some("the [admin] section changed")
        );
    }

    #[test]
    fn the_listen_address_can_come_from_the_environment() {
        let c = Config::parse(
            &format!(
                "{QUEUE}[admin]\ntokens = {{ a = \"{}\" }}\n",
                token_hash("t")
            ),
            "t",
            |k| (k == env::ADMIN_LISTEN).then(|| "127.0.0.1:7001".to_string()),
        )
        .unwrap();
        assert_eq!(c.admin.unwrap().listen.port(), 7001);
    }
}
