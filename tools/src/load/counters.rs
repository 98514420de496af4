//! The gateway's request counters (`GET /_stats`): Redis round trips the
//! edge made, split by script, between two snapshots.

use std::collections::BTreeMap;

use anyhow::Context;
use queuegate_shared::script;
use serde_json::Value as Json;

/// One `/_stats` reading.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// HTTP requests the gateway served.
    pub requests: u64,
    /// Round trips to Redis.
    pub round_trips: u64,
    /// Commands by name.
    pub commands: BTreeMap<String, u64>,
    /// Script calls (EVALSHA and EVAL) by the script's SHA-1.
    pub scripts: BTreeMap<String, u64>,
}

impl Counters {
    /// Reads the gateway at `url` with its token.
    pub async fn read(http: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<Counters> {
        let body: Json = http
            .get(format!("{url}/_stats"))
            .bearer_auth(token)
            .send()
            .await
            .context("GET /_stats")?
            .error_for_status()
            .context("GET /_stats")?
            .json()
            .await
            .context("GET /_stats body")?;
        let map = |v: &Json| -> BTreeMap<String, u64> {
            v.as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default()
        };
        Ok(Counters {
            requests: body["requests"].as_u64().unwrap_or_default(),
            round_trips: body["roundTrips"].as_u64().unwrap_or_default(),
            commands: map(&body["commands"]),
            scripts: map(&body["scripts"]),
        })
    }

    /// What happened since `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        let diff = |now: &BTreeMap<String, u64>, then: &BTreeMap<String, u64>| {
            now.iter()
                .map(|(k, n)| (k.clone(), n - then.get(k).copied().unwrap_or_default()))
                .filter(|(_, n)| *n > 0)
                .collect()
        };
        Counters {
            requests: self.requests - earlier.requests,
            round_trips: self.round_trips - earlier.round_trips,
            commands: diff(&self.commands, &earlier.commands),
            scripts: diff(&self.scripts, &earlier.scripts),
        }
    }

    /// Script calls by script name (scripts of this build of `shared`; a
    /// worker built from other Lua shows up as `unknown`).
    pub fn by_script(&self) -> BTreeMap<&'static str, u64> {
        let mut out = BTreeMap::new();
        for (sha, n) in &self.scripts {
            let name = script::all()
                .iter()
                .find(|s| s.sha1() == sha)
                .map_or("unknown", |s| s.name());
            *out.entry(name).or_default() += n;
        }
        out
    }

    /// Round trips that were not script calls (PING, plain commands).
    pub fn non_script_commands(&self) -> u64 {
        self.commands
            .iter()
            .filter(|(name, _)| !name.starts_with("EVAL"))
            .map(|(_, n)| n)
            .sum()
    }
}
