//! `[defaults]` and `[[queue]]`: each queue's settings, layered over the
//! shared defaults and validated, plus the rules that involve Redis timing.

use std::time::Duration;

use queuegate_shared::{QueueId, Settings};
use serde::Deserialize;

use super::{ConfigError, Origin, RedisConfig};

/// Most admissions one tick may be configured for: a batch of 1,000 costs
/// Redis ~10–25 ms (docs/benchmarks/scheduler.md), so this keeps one
/// script well under the response timeout.
const MAX_ADMITS_PER_TICK: f64 = 5_000.0;

/// One queue this process schedules.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue id (its keys' hash tag).
    pub id: QueueId,
    /// Its validated effective settings.
    pub settings: Settings,
    /// Its scheduled opening and closing, if the file sets them.
    pub schedule: FileSchedule,
}

impl QueueConfig {
    /// A short fingerprint of what the file says of this queue (its
    /// settings and schedule): schedulers compare theirs with the one
    /// published beside the lease, so different files are seen.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut text = String::new();
        for (name, value) in self.settings.to_fields() {
            text.push_str(&format!("{name}={value}\n"));
        }
        for (name, at) in [
            ("opens_at", self.schedule.opens_at),
            ("closes_at", self.schedule.closes_at),
        ] {
            text.push_str(&format!(
                "{name}={}\n",
                at.map_or(String::new(), |t| t.to_string())
            ));
        }
        hex::encode(&Sha256::digest(text.as_bytes())[..8])
    }
}

/// `opens_at` / `closes_at` of a `[[queue]]` (RFC 3339), as epoch ms. The
/// file's values are published when a scheduler takes the lease or reloads
/// them; a time the file leaves out is left as it is in Redis (the operator
/// sets it with `queuegate-scheduler schedule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileSchedule {
    /// The opening: before it new places go to the pre-queue.
    pub opens_at: Option<u64>,
    /// The closing: from it no new places are taken.
    pub closes_at: Option<u64>,
}

impl FileSchedule {
    /// Whether the file sets anything.
    pub fn is_set(&self) -> bool {
        self.opens_at.is_some() || self.closes_at.is_some()
    }
}

/// Epoch ms of an RFC 3339 time with an offset (`2026-12-03T14:00:00Z`,
/// `2026-12-03T15:00:00+01:00`).
pub fn parse_time(text: &str) -> Result<u64, String> {
    let t = chrono::DateTime::parse_from_rfc3339(text.trim()).map_err(|e| {
        format!("{text:?} is not an RFC 3339 time with an offset, e.g. 2026-12-03T14:00:00Z ({e})")
    })?;
    u64::try_from(t.timestamp_millis()).map_err(|_| format!("{text:?} is before 1970"))
}

/// An epoch-ms time as RFC 3339 in UTC, for messages.
pub fn format_time(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || format!("{ms} ms"),
            |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        )
}

/// The schedule keys of a queue's table, removed from it.
fn file_schedule(table: &mut toml::Table) -> Result<FileSchedule, String> {
    let mut time = |key: &str| -> Result<Option<u64>, String> {
        match table.remove(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => parse_time(&s).map(Some),
            Some(toml::Value::Datetime(d)) => parse_time(&d.to_string()).map(Some),
            Some(other) => Err(format!("{key} = {other}: must be an RFC 3339 time")),
        }
        .map_err(|e| format!("{key}: {e}"))
    };
    let schedule = FileSchedule {
        opens_at: time("opens_at")?,
        closes_at: time("closes_at")?,
    };
    if let (Some(open), Some(close)) = (schedule.opens_at, schedule.closes_at) {
        if close <= open {
            return Err("closes_at must be after opens_at".into());
        }
    }
    Ok(schedule)
}

/// Every `[[queue]]`, in file order, with `[defaults]` applied; ids unique.
pub(super) fn queue_configs(
    defaults: &toml::Table,
    tables: &[toml::Table],
    redis: &RedisConfig,
    at: Origin<'_>,
) -> Result<Vec<QueueConfig>, ConfigError> {
    if tables.is_empty() {
        return Err(at.invalid(
            "[[queue]]",
            "no queue configured; add one, e.g. [[queue]] id = \"main\"",
        ));
    }
    let defaults = overrides(defaults).map_err(|m| at.invalid("[defaults]", m))?;
    let mut queues: Vec<QueueConfig> = Vec::new();
    for (index, table) in tables.iter().enumerate() {
        let queue = queue_config(table, &defaults, redis, index, at)?;
        if queues.iter().any(|q| q.id == queue.id) {
            return Err(at.invalid(
                format!("queue \"{}\"", queue.id),
                "configured twice; each [[queue]] id must be unique",
            ));
        }
        queues.push(queue);
    }
    Ok(queues)
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
    index: usize,
    at: Origin<'_>,
) -> Result<QueueConfig, ConfigError> {
    let unnamed = format!("[[queue]] #{}", index + 1);
    let id_text = match table.get("id") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(other) => return Err(at.invalid(unnamed, format!("id = {other}: must be a string"))),
        None => return Err(at.invalid(unnamed, "id is missing, e.g. id = \"main\"")),
    };
    let id = QueueId::new(&id_text)
        .map_err(|e| at.invalid(unnamed, format!("id = {id_text:?}: {e}")))?;
    let place = format!("queue \"{id}\"");
    let mut own = table.clone();
    own.remove("id");
    let schedule = file_schedule(&mut own).map_err(|m| at.invalid(&place, m))?;
    let own = overrides(&own).map_err(|m| at.invalid(&place, m))?;

    let settings = merged_settings(defaults, &own).map_err(|m| at.invalid(&place, m))?;
    check_settings(&settings, redis.response_timeout).map_err(|m| at.invalid(&place, m))?;
    Ok(QueueConfig {
        id,
        settings,
        schedule,
    })
}

/// Every rule a queue's settings must meet, in the file or at run time:
/// each setting's own ([`Settings::validate`]), and those that involve
/// the tick and Redis' timing.
pub fn check_settings(settings: &Settings, response_timeout: Duration) -> Result<(), String> {
    settings.validate().map_err(|e| e.to_string())?;
    let per_tick = settings.admit_rate_per_second * settings.tick_ms as f64 / 1000.0;
    if per_tick > MAX_ADMITS_PER_TICK {
        return Err(format!(
            "admit_rate_per_second × tick_ms = {per_tick:.0} admissions per tick: at most \
             {MAX_ADMITS_PER_TICK:.0} (one admit script blocks Redis while it runs); \
             lower tick_ms"
        ));
    }
    let needed = settings.tick_ms + 2 * as_ms(response_timeout);
    if settings.lease_ttl_ms <= needed {
        return Err(format!(
            "lease_ttl_ms = {}: must exceed tick_ms + 2 × [redis] response_timeout_ms \
             ({} + 2 × {} = {needed}), the longest gap between two renewals",
            settings.lease_ttl_ms,
            settings.tick_ms,
            as_ms(response_timeout)
        ));
    }
    Ok(())
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
