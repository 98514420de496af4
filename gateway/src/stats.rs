//! Counters for measurements: how many requests the gateway served, how many
//! Redis round trips they cost and which commands and scripts they ran, read
//! with an authenticated `GET /_stats` (load tests divide these by the edge
//! operations they drove).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value as JsonValue};

use crate::protocol::Command;

/// The path of the counters. No Redis command starts with `_`, so it cannot
/// shadow the path form.
pub const STATS_PATH: &str = "/_stats";

/// Shared counters; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    // A std mutex, held for a few map updates and never across an await:
    // a dev gateway serves tens of thousands of requests per second at most,
    // far below where this lock would matter.
    inner: Arc<Mutex<Counts>>,
}

#[derive(Debug, Default)]
struct Counts {
    requests: u64,
    round_trips: u64,
    commands: BTreeMap<String, u64>,
    scripts: BTreeMap<String, u64>,
}

impl Stats {
    /// Counts one authorized HTTP request (`/_stats` itself is not counted).
    pub fn request(&self) {
        self.with(|c| c.requests += 1);
    }

    /// Counts one round trip to Redis carrying `commands` (one for the
    /// single forms, the batch for `/pipeline` and `/multi-exec`).
    pub fn round_trip<'a>(&self, commands: impl IntoIterator<Item = &'a Command>) {
        self.with(|c| {
            c.round_trips += 1;
            for command in commands {
                let (name, script) = label(command);
                *c.commands.entry(name).or_default() += 1;
                if let Some(sha) = script {
                    *c.scripts.entry(sha).or_default() += 1;
                }
            }
        });
    }

    /// The counters as JSON: `{"requests", "roundTrips", "commands":
    /// {NAME: n}, "scripts": {sha1: n}}`.
    pub fn snapshot(&self) -> JsonValue {
        let c = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        json!({
            "requests": c.requests,
            "roundTrips": c.round_trips,
            "commands": c.commands,
            "scripts": c.scripts,
        })
    }

    fn with(&self, f: impl FnOnce(&mut Counts)) {
        // A panic elsewhere cannot leave these counters half-updated in a
        // way that matters: keep counting.
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// The command's name (upper case, `?` when it is not a plain word) and, for
/// a script call, the script's SHA-1: EVALSHA names it, EVAL's source is
/// hashed, so both count for the same script.
fn label(command: &Command) -> (String, Option<String>) {
    let name = command.name();
    let plain = name.len() <= 32 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let name = if plain { name } else { "?".to_string() };
    let script = match (name.as_str(), command.args().first()) {
        ("EVALSHA" | "EVALSHA_RO", Some(sha)) => Some(
            std::str::from_utf8(sha)
                .ok()
                .filter(|s| s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .map_or_else(|| "?".to_string(), str::to_ascii_lowercase),
        ),
        ("EVAL" | "EVAL_RO", Some(source)) => {
            Some(sha1_smol::Sha1::from(source).digest().to_string())
        }
        _ => None,
    };
    (name, script)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Command {
        Command::new(words.iter().map(|w| w.as_bytes().to_vec()).collect()).unwrap()
    }

    #[test]
    fn evalsha_and_eval_of_one_script_count_together() {
        let source = "return 1";
        let sha = sha1_smol::Sha1::from(source).digest().to_string();
        let stats = Stats::default();
        stats.request();
        stats.round_trip([&cmd(&["evalsha", &sha.to_uppercase(), "0"])]);
        stats.round_trip([&cmd(&["EVAL", source, "0"])]);
        stats.round_trip(&[cmd(&["GET", "k"]), cmd(&["get", "j"])]);
        let s = stats.snapshot();
        assert_eq!(s["requests"], 1);
        assert_eq!(s["roundTrips"], 3);
        assert_eq!(s["commands"]["EVALSHA"], 1);
        assert_eq!(s["commands"]["EVAL"], 1);
        assert_eq!(s["commands"]["GET"], 2);
        assert_eq!(s["scripts"][&sha], 2);
    }

    #[test]
    fn odd_names_and_hashes_are_not_echoed() {
        let stats = Stats::default();
        stats.round_trip([&cmd(&["no such/command", "x"])]);
        stats.round_trip([&cmd(&["EVALSHA", "not-a-sha", "0"])]);
        let s = stats.snapshot();
        assert_eq!(s["commands"]["?"], 1);
        assert_eq!(s["scripts"]["?"], 1);
    }
}
