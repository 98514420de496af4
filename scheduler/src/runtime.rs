//! Settings at run time (issue 26): an operator changes a queue's
//! settings through the admin API or the CLI; they are kept in Redis
//! (`settings`, setting → JSON value) and win over the config file's, which
//! stay the defaults of every setting not set there. Each change bumps the
//! config hash's `settings_version`; the lease holder sees it in its next
//! admit reply, applies the settings (merged over its file's, checked by
//! the same rules as the file) and publishes them, so the edge reads them
//! at once (docs/scheduler.md, *Settings at run time*).

use std::time::Duration;

use queuegate_shared::fields::config as cf;
use queuegate_shared::{QueueKeys, Settings};
use serde::Deserialize;

use crate::config::check_settings;
use crate::connect::RedisConn;
use crate::engine::EngineError;

/// Run-time settings: setting → value.
pub type Values = serde_json::Map<String, serde_json::Value>;

/// What Redis holds of a queue's run-time settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stored {
    /// `settings_version` (None: never set).
    pub version: Option<u64>,
    /// `settings_applied`: the version the lease holder last applied.
    pub applied: Option<u64>,
    /// `settings_refused`: the version the lease holder last refused, and
    /// why (its config file makes them break a rule).
    pub refused: Option<(u64, String)>,
    /// The settings, by name. A value that is not JSON (a hand edit) is
    /// left out, with a warning.
    pub values: Values,
}

impl Stored {
    /// The version, 0 when never set (as the admit reply reports it).
    pub fn version_number(&self) -> u64 {
        self.version.unwrap_or(0)
    }
}

/// Reads a queue's run-time settings, their version and the version
/// applied, in one round trip.
pub async fn read(conn: &mut RedisConn, keys: &QueueKeys) -> Result<Stored, EngineError> {
    type Versions = (Option<u64>, Option<u64>, Option<String>);
    let (fields, (version, applied, refused)): (Vec<(String, String)>, Versions) = redis::pipe()
        .hgetall(keys.settings())
        .cmd("HMGET")
        .arg(keys.config())
        .arg(cf::SETTINGS_VERSION)
        .arg(cf::SETTINGS_APPLIED)
        .arg(cf::SETTINGS_REFUSED)
        .query_async(conn)
        .await?;
    let mut values = Values::new();
    for (name, text) in fields {
        match serde_json::from_str(&text) {
            Ok(v) => {
                values.insert(name, v);
            }
            Err(e) => tracing::warn!(
                queue = keys.queue().as_str(),
                setting = name,
                error = %e,
                "a run-time setting in Redis is not JSON; left out"
            ),
        }
    }
    let refused = refused.and_then(|r| {
        let (v, why) = r.split_once('|')?;
        Some((v.parse().ok()?, why.to_string()))
    });
    Ok(Stored {
        version,
        applied,
        refused,
        values,
    })
}

/// Records that the holder applied `version` (and published it).
pub async fn mark_applied(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    version: u64,
) -> Result<(), EngineError> {
    let _: () = redis::cmd("HSET")
        .arg(keys.config())
        .arg(cf::SETTINGS_APPLIED)
        .arg(version)
        .query_async(conn)
        .await?;
    Ok(())
}

/// Records that the holder refused `version` and why (its config file
/// makes the settings break a rule): the admin API and `settings` say so.
pub async fn mark_refused(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    version: u64,
    reason: &str,
) -> Result<(), EngineError> {
    let _: () = redis::cmd("HSET")
        .arg(keys.config())
        .arg(cf::SETTINGS_REFUSED)
        .arg(format!("{version}|{reason}"))
        .query_async(conn)
        .await?;
    Ok(())
}

/// `file` with `values` over it, checked by every rule the config file
/// is checked by (`response_timeout` is `[redis] response_timeout_ms`).
pub fn effective(
    file: &Settings,
    values: &Values,
    response_timeout: Duration,
) -> Result<Settings, String> {
    let names = Settings::field_names();
    if let Some(unknown) = values.keys().find(|k| !names.contains(k)) {
        return Err(format!(
            "unknown setting `{unknown}`; settings are: {}",
            names.join(", ")
        ));
    }
    let base = serde_json::to_value(file).map_err(|e| e.to_string())?;
    let merged = |extra: &Values| {
        let mut all = base.as_object().cloned().unwrap_or_default();
        all.extend(extra.clone());
        Settings::deserialize(serde_json::Value::Object(all))
    };
    let settings = match merged(values) {
        Ok(s) => s,
        Err(whole) => {
            // Pin a type error on the setting that causes it.
            for (name, value) in values {
                let one = Values::from_iter([(name.clone(), value.clone())]);
                if let Err(e) = merged(&one) {
                    return Err(format!("{name} = {value}: {e}"));
                }
            }
            return Err(whole.to_string());
        }
    };
    check_settings(&settings, response_timeout)?;
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TIMEOUT: Duration = Duration::from_millis(500);

    fn values(v: serde_json::Value) -> Values {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn values_win_over_the_file_and_the_rest_is_the_file() {
        let file = Settings {
            max_active: 300,
            ..Settings::default()
        };
        let s = effective(
            &file,
            &values(json!({"admit_rate_per_second": 50, "idle_passthrough": false})),
            TIMEOUT,
        )
        .unwrap();
        assert_eq!(s.admit_rate_per_second, 50.0);
        assert!(!s.idle_passthrough);
        assert_eq!(s.max_active, 300, "not set at run time: the file's");
        assert_eq!(effective(&file, &Values::new(), TIMEOUT).unwrap(), file);
    }

    #[test]
    fn every_rule_of_the_file_holds() {
        let file = Settings::default();
        for (bad, why) in [
            (json!({"speed": 3}), "unknown setting `speed`"),
            (json!({"max_active": "many"}), "max_active = \"many\""),
            (json!({"max_active": -1}), "max_active = -1"),
            (json!({"poll_min_ms": 9000, "poll_max_ms": 1000}), "poll"),
            (
                json!({"admit_rate_per_second": 60000}),
                "admissions per tick",
            ),
            (json!({"lease_ttl_ms": 900}), "lease_ttl_ms = 900"),
        ] {
            let err = effective(&file, &values(bad.clone()), TIMEOUT).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
