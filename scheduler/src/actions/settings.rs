//! `settings`: show a queue's run-time settings beside its file's, change
//! them (checked by every rule the file is, written only if nobody changed
//! them meanwhile), or clear them.

use queuegate_shared::ops::{SetSettings, SettingsReply};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::{Config, QueueConfig};
use crate::connect::RedisConn;
use crate::engine;
use crate::runtime;

/// Show, change or clear a queue's run-time settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// Which.
    pub call: SettingsCall,
}

/// What to do with the settings.
#[derive(Debug, Clone)]
pub enum SettingsCall {
    /// Show them.
    Show,
    /// Each entry sets a setting, or with `null` removes it (back to the
    /// file's), as a JSON merge patch does.
    Change(runtime::Values),
    /// Remove every run-time setting.
    Clear,
}

/// A queue's settings as the operator sees them (`settings` / `GET
/// …/settings`): the run-time ones, the file's, and those in force.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SettingsView {
    /// The queue.
    pub queue: String,
    /// The run-time settings' version (0: never set).
    pub version: u64,
    /// The version the lease holder last put in force (None: none yet);
    /// behind `version` until its next tick, or when its config file
    /// makes them break a rule (its log says why).
    pub applied_version: Option<u64>,
    /// The run-time settings: they win over the file's.
    pub runtime: runtime::Values,
    /// This scheduler's config file's settings for the queue.
    pub file: queuegate_shared::Settings,
    /// The file's with the run-time ones over them: what the lease holder
    /// enforces once it applied this version (if its file is the same).
    pub effective: queuegate_shared::Settings,
    /// What the lease holder did with `version`: after a change, the
    /// answer waits for it (up to [`HOLDER_WAIT`]).
    pub holder: HolderAnswer,
}

/// How long a change waits for the lease holder to apply or refuse it:
/// a busy holder does within a tick, an idle one is woken at once.
pub const HOLDER_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// What the lease holder did with the run-time settings' version.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HolderAnswer {
    /// `applied` (in force), `refused` (its config file makes them break
    /// a rule; its settings are kept) or `pending` (no holder, or not yet).
    pub outcome: &'static str,
    /// Why the holder refused them.
    pub reason: Option<String>,
}

impl HolderAnswer {
    fn of(stored: &runtime::Stored) -> HolderAnswer {
        let version = stored.version_number();
        match &stored.refused {
            Some((v, why)) if *v == version && stored.applied.is_none_or(|a| a < version) => {
                HolderAnswer {
                    outcome: "refused",
                    reason: Some(why.clone()),
                }
            }
            _ if version == 0 || stored.applied.is_some_and(|a| a >= version) => HolderAnswer {
                outcome: "applied",
                reason: None,
            },
            _ => HolderAnswer {
                outcome: "pending",
                reason: None,
            },
        }
    }
}

impl Settings {
    /// `settings`, `settings_change` or `settings_clear`.
    pub(super) fn name(&self) -> &'static str {
        match self.call {
            SettingsCall::Show => "settings",
            SettingsCall::Change(_) => "settings_change",
            SettingsCall::Clear => "settings_clear",
        }
    }

    /// The changes asked for, as JSON, for the audit line.
    pub(super) fn changes(&self) -> Option<String> {
        match &self.call {
            SettingsCall::Change(values) => {
                Some(serde_json::Value::Object(values.clone()).to_string())
            }
            _ => None,
        }
    }

    /// Shows, changes or clears; a change is in force at the lease
    /// holder's next tick.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<SettingsView, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        match &self.call {
            SettingsCall::Show => show(config, conn, q).await,
            SettingsCall::Change(changes) => change(config, conn, q, changes).await,
            SettingsCall::Clear => clear(config, conn, q).await,
        }
    }
}

fn view(
    q: &QueueConfig,
    stored: runtime::Stored,
    effective: queuegate_shared::Settings,
) -> SettingsView {
    let holder = HolderAnswer::of(&stored);
    SettingsView {
        queue: q.id.to_string(),
        version: stored.version_number(),
        applied_version: stored.applied,
        runtime: stored.values,
        file: q.settings.clone(),
        effective,
        holder,
    }
}

async fn show(
    config: &Config,
    conn: &mut RedisConn,
    q: &QueueConfig,
) -> Result<SettingsView, ActionError> {
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let stored = runtime::read(conn, &keys).await?;
    // Stored settings this file refuses are shown as they are; the
    // holder refuses them too (and logs why).
    let effective = runtime::effective(&q.settings, &stored.values, config.redis.response_timeout)
        .unwrap_or_else(|_| q.settings.clone());
    Ok(view(q, stored, effective))
}

/// The result is checked by every rule the config file is, before
/// anything is written; written only if nobody changed the settings since
/// they were read (else a conflict: read them again).
async fn change(
    config: &Config,
    conn: &mut RedisConn,
    q: &QueueConfig,
    changes: &runtime::Values,
) -> Result<SettingsView, ActionError> {
    if changes.is_empty() {
        return Err(ActionError::BadInput(
            "name at least one setting to change".into(),
        ));
    }
    let names = queuegate_shared::Settings::field_names();
    for (name, value) in changes {
        if !names.contains(name) {
            return Err(ActionError::BadInput(format!(
                "unknown setting `{name}`; settings are: {}",
                names.join(", ")
            )));
        }
        if !(value.is_null() || value.is_number() || value.is_boolean()) {
            return Err(ActionError::BadInput(format!(
                "{name} = {value}: a setting is a number or true/false (null removes it)"
            )));
        }
    }
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let stored = runtime::read(conn, &keys).await?;
    let mut values = stored.values.clone();
    let (mut set, mut remove) = (Vec::new(), Vec::new());
    for (name, value) in changes {
        if value.is_null() {
            values.remove(name);
            remove.push(name.clone());
        } else {
            values.insert(name.clone(), value.clone());
            set.push((name.clone(), value.to_string()));
        }
    }
    let effective = runtime::effective(&q.settings, &values, config.redis.response_timeout)
        .map_err(|e| ActionError::BadInput(format!("queue {}: {e}", q.id)))?;
    let version = write(conn, &keys, &stored, set, remove).await?;
    let stored = holder_answer(conn, &keys, version).await?;
    Ok(view(q, stored, effective))
}

/// The file's settings are in force again at the lease holder's next tick.
async fn clear(
    config: &Config,
    conn: &mut RedisConn,
    q: &QueueConfig,
) -> Result<SettingsView, ActionError> {
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let stored = runtime::read(conn, &keys).await?;
    let stored = if stored.values.is_empty() {
        stored
    } else {
        let remove = stored.values.keys().cloned().collect();
        let version = write(conn, &keys, &stored, Vec::new(), remove).await?;
        holder_answer(conn, &keys, version).await?
    };
    Ok(view(q, stored, q.settings.clone()))
}

/// The settings once the lease holder applied or refused `version`, or
/// as they are after [`HOLDER_WAIT`] (or at once with no holder): the
/// answer says what the holder did, not only what was written.
async fn holder_answer(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    version: u64,
) -> Result<runtime::Stored, ActionError> {
    let deadline = tokio::time::Instant::now() + HOLDER_WAIT;
    loop {
        let stored = runtime::read(conn, keys).await?;
        let answered = stored.applied.is_some_and(|a| a >= version)
            || stored.refused.as_ref().is_some_and(|(v, _)| *v >= version);
        let holder: Option<String> = redis::cmd("GET")
            .arg(keys.lock())
            .query_async(conn)
            .await
            .map_err(crate::engine::EngineError::from)?;
        if answered || holder.is_none() || tokio::time::Instant::now() >= deadline {
            return Ok(stored);
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

async fn write(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    read: &runtime::Stored,
    set: Vec<(String, String)>,
    remove: Vec<String>,
) -> Result<u64, ActionError> {
    let reply = engine::run(
        conn,
        &SetSettings {
            keys,
            read_version: read.version,
            set,
            remove,
        },
    )
    .await?;
    match reply {
        SettingsReply::Changed(v) => Ok(v),
        SettingsReply::Moved(v) => Err(ActionError::Conflict(format!(
            "queue {}: the run-time settings changed meanwhile (now version {v}); read them and try again",
            keys.queue()
        ))),
    }
}
