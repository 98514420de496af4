//! Environment variables: the overrides of a file (URLs and secrets stay
//! out of a file that is often world-readable or committed) and the config
//! from the environment alone. [`Environment`] is as strict as a file: an
//! unknown `QUEUEGATE_*` name is refused (with the likely intended one),
//! and a secret may come from a file named by its `*_FILE` variant.

use std::collections::BTreeMap;
use std::path::Path;

use queuegate_shared::Settings;

use super::{ConfigError, Origin};

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
/// Replaces `[admin] listen`.
pub const ADMIN_LISTEN: &str = "QUEUEGATE_ADMIN_LISTEN";
/// Config from the environment alone: the queue's id (default `main`).
pub const QUEUE: &str = "QUEUEGATE_QUEUE";
/// Config from the environment alone: the admin API's tokens,
/// `name=sha256:<hex>` pairs, comma-separated.
pub const ADMIN_TOKENS: &str = "QUEUEGATE_ADMIN_TOKENS";
/// Config from the environment alone: `[redis] key_prefix`.
pub const KEY_PREFIX: &str = "QUEUEGATE_KEY_PREFIX";
/// Config from the environment alone: the queue's scheduled opening
/// (RFC 3339).
pub const OPENS_AT: &str = "QUEUEGATE_OPENS_AT";
/// Config from the environment alone: the queue's scheduled closing.
pub const CLOSES_AT: &str = "QUEUEGATE_CLOSES_AT";

/// The variables that may hold a secret (a password, or a URL or token
/// list that carries one): each may instead name a file holding it, as
/// `<NAME>_FILE` (a container's mounted secret).
pub const SECRETS: [&str; 5] = [
    REDIS_URL,
    REDIS_NODES,
    REDIS_USERNAME,
    REDIS_PASSWORD,
    ADMIN_TOKENS,
];

/// The suffix of a secret's file variant.
pub const FILE_SUFFIX: &str = "_FILE";

/// `QUEUEGATE_*` variables of the project's build scripts, not the
/// scheduler's: set in a developer's shell, they are not mistakes.
const NOT_OURS: [&str; 3] = [
    "QUEUEGATE_TOOLS",
    "QUEUEGATE_PAGE_TEMPLATE",
    "QUEUEGATE_VENV",
];

/// The variable of a queue setting: `QUEUEGATE_` and its name in capitals
/// (`QUEUEGATE_ADMIT_RATE_PER_SECOND`).
pub fn setting_var(name: &str) -> String {
    format!("QUEUEGATE_{}", name.to_ascii_uppercase())
}

/// Every `QUEUEGATE_*` name the scheduler reads.
pub fn known_names() -> Vec<String> {
    let mut names: Vec<String> = [
        REDIS_URL,
        REDIS_NODES,
        REDIS_USERNAME,
        REDIS_PASSWORD,
        LISTEN,
        CONFIG,
        ADMIN_LISTEN,
        QUEUE,
        ADMIN_TOKENS,
        KEY_PREFIX,
        OPENS_AT,
        CLOSES_AT,
    ]
    .map(String::from)
    .into();
    names.extend(SECRETS.iter().map(|s| format!("{s}{FILE_SUFFIX}")));
    names.extend(Settings::field_names().iter().map(|n| setting_var(n)));
    names
}

/// The known name `unknown` most likely meant, if one is close enough.
pub fn likely_meant(unknown: &str) -> Option<String> {
    let bare = |n: &str| n.trim_start_matches("QUEUEGATE_").to_ascii_lowercase();
    let asked = bare(unknown);
    known_names()
        .into_iter()
        .map(|n| (strsim::jaro_winkler(&asked, &bare(&n)), n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

/// The scheduler's environment: its `QUEUEGATE_*` variables, checked, with
/// every `*_FILE` secret read. Values are never shown: a secret's
/// messages name the variable and the file only.
#[derive(Clone, Default)]
pub struct Environment {
    vars: BTreeMap<String, String>,
}

impl std::fmt::Debug for Environment {
    // Values may be secrets: names only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl Environment {
    /// This process's environment, secret files read from disk.
    pub fn from_process() -> Result<Environment, ConfigError> {
        Environment::from_vars(std::env::vars_os().filter_map(|(k, v)| {
            Some((k.into_string().ok()?, v.into_string().unwrap_or_default()))
        }))
        .and_then(|env| env.read_files(|p| std::fs::read_to_string(p)))
    }

    /// The `QUEUEGATE_*` variables among `vars` (others are not ours),
    /// each a name the scheduler reads, or refused with the likely
    /// intended one; a secret and its `_FILE` both set are refused too.
    pub fn from_vars(
        vars: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Environment, ConfigError> {
        let at = Origin("the environment");
        let known = known_names();
        let mut kept = BTreeMap::new();
        for (name, value) in vars {
            if !name.starts_with("QUEUEGATE_") || NOT_OURS.contains(&name.as_str()) {
                continue;
            }
            if !known.contains(&name) {
                let hint = likely_meant(&name)
                    .map_or_else(String::new, |n| format!(": did you mean {n}?"));
                return Err(at.invalid(
                    &name,
                    format!(
                        "is not a queuegate variable{hint} (docs/scheduler.md, \
                         *Environment overrides*; unset it, or spell it right)"
                    ),
                ));
            }
            kept.insert(name, value);
        }
        for secret in SECRETS {
            let file = format!("{secret}{FILE_SUFFIX}");
            if kept.contains_key(secret) && kept.contains_key(&file) {
                return Err(at.invalid(
                    secret,
                    format!("and {file} are both set: give the secret one way"),
                ));
            }
        }
        Ok(Environment { vars: kept })
    }

    /// Replaces each `<SECRET>_FILE` by `<SECRET>` holding the file's text
    /// (without a final line break), read with `read`.
    pub fn read_files(
        mut self,
        read: impl Fn(&Path) -> std::io::Result<String>,
    ) -> Result<Environment, ConfigError> {
        let at = Origin("the environment");
        for secret in SECRETS {
            let file = format!("{secret}{FILE_SUFFIX}");
            let Some(path) = self.vars.remove(&file) else {
                continue;
            };
            let text = read(Path::new(&path))
                .map_err(|e| at.invalid(&file, format!("cannot read {path}: {e}")))?;
            let text = text.trim_end_matches(['\n', '\r']).to_string();
            if text.is_empty() {
                return Err(at.invalid(&file, format!("{path} is empty")));
            }
            self.vars.insert(secret.to_string(), text);
        }
        Ok(self)
    }

    /// A variable's value (a secret's read from its file).
    pub fn get(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Environment, ConfigError> {
        Environment::from_vars(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_likely_one() {
        let e = env(&[("QUEUEGATE_ADMIT_RATE", "50")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("QUEUEGATE_ADMIT_RATE:")
                && e.contains("did you mean QUEUEGATE_ADMIT_RATE_PER_SECOND?"),
            "{e}"
        );
        assert!(!e.contains("50"), "values are not shown: {e}");
        let e = env(&[("QUEUEGATE_REDIS_PASWORD", "pw")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("did you mean QUEUEGATE_REDIS_PASSWORD?"), "{e}");
        let e = env(&[("QUEUEGATE_XYZZY", "1")]).unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "nothing close: {e}");
        // Others' variables and the build scripts' are not ours to judge.
        let ok = env(&[
            ("HOME", "/root"),
            ("QUEUEGATE_TOOLS", "/x"),
            ("QUEUEGATE_MAX_ACTIVE", "5"),
        ])
        .unwrap();
        assert_eq!(ok.get("QUEUEGATE_MAX_ACTIVE").as_deref(), Some("5"));
        assert_eq!(ok.get("HOME"), None);
    }

    #[test]
    fn a_secret_may_come_from_a_file_but_not_both_ways() {
        let e = env(&[
            ("QUEUEGATE_REDIS_PASSWORD", "pw"),
            ("QUEUEGATE_REDIS_PASSWORD_FILE", "/run/secrets/pw"),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("both set") && !e.contains("pw\""), "{e}");
        let read = |p: &Path| match p.to_str() {
            Some("/run/secrets/pw") => Ok("s3cret\n".to_string()),
            Some("/run/secrets/empty") => Ok("\n".to_string()),
            _ => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
        };
        let got = env(&[
            ("QUEUEGATE_REDIS_PASSWORD_FILE", "/run/secrets/pw"),
            ("QUEUEGATE_ADMIN_TOKENS", "ops=sha256:00"),
        ])
        .unwrap()
        .read_files(read)
        .unwrap();
        assert_eq!(got.get(REDIS_PASSWORD).as_deref(), Some("s3cret"));
        assert_eq!(got.get("QUEUEGATE_REDIS_PASSWORD_FILE"), None);
        assert!(!format!("{got:?}").contains("s3cret"));
        for (path, want) in [
            ("/run/secrets/none", "cannot read /run/secrets/none"),
            ("/run/secrets/empty", "is empty"),
        ] {
            let e = env(&[("QUEUEGATE_ADMIN_TOKENS_FILE", path)])
                .unwrap()
                .read_files(read)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("QUEUEGATE_ADMIN_TOKENS_FILE") && e.contains(want),
                "{e}"
            );
        }
    }
}
