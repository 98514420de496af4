//! What an operator can do to a queue, once, for both the command line
//! ([`crate::cli`]) and the admin API ([`crate::admin`]): each action takes
//! the config, a Redis handle and the queue, checks its input before Redis
//! is asked, and returns what it did as data (the CLI prints it, the API
//! answers it as JSON). A refusal is an [`ActionError`] that changed
//! nothing.

use std::collections::BTreeMap;

use queuegate_shared::bypass::{self, Link};
use queuegate_shared::fields::config as cf;
pub use queuegate_shared::ops::Change;
use queuegate_shared::ops::{
    Bypass, BypassCall, BypassReply, Revoke, RevokeCall, RevokeReply, Schedule, SetNotice,
    SetSettings, SetState, SettingsReply, StateSwitch, Status, MAX_REVOKE_MS,
};
use queuegate_shared::{QueueKeys, QueueState, Settings};
use serde::Serialize;

use crate::config::{self, Config, QueueConfig};
use crate::connect::RedisConn;
use crate::engine::{self, EngineError};
use crate::runtime;

/// Why an action did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The input is not valid (a time, a notice, a missing queue name).
    #[error("{0}")]
    BadInput(String),
    /// The queue is not one this scheduler is configured for.
    #[error("{0}")]
    UnknownQueue(String),
    /// No bypass link with that id.
    #[error("{0}")]
    UnknownBypass(String),
    /// The queue is not in a state the action applies to.
    #[error("{0}")]
    Refused(String),
    /// The inputs are valid one by one but not together (a closing before
    /// the opening).
    #[error("{0}")]
    Conflict(String),
    /// Redis could not be asked or answered with an error.
    #[error(transparent)]
    Redis(#[from] EngineError),
}

/// A state switch an operator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// Stop admitting; visitors can still enter.
    Pause,
    /// Admit again, from paused only.
    Resume,
    /// Refuse new visitors and stop admitting.
    Close,
    /// Accept visitors and admit, whatever the state was.
    Open,
    /// Refuse new visitors, admit the line until it is empty.
    Drain,
}

impl Switch {
    /// Every switch, by its name in the CLI and the API's paths.
    pub const ALL: [(&'static str, Switch); 5] = [
        ("pause", Switch::Pause),
        ("resume", Switch::Resume),
        ("close", Switch::Close),
        ("open", Switch::Open),
        ("drain", Switch::Drain),
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("", |(n, _)| n)
    }

    /// The state it sets and the state it requires, if any. `resume` only
    /// leaves paused, compared inside the script: a `close` that lands
    /// meanwhile is never undone.
    fn target(self) -> (QueueState, Option<QueueState>) {
        match self {
            Switch::Pause => (QueueState::Paused, None),
            Switch::Resume => (QueueState::Open, Some(QueueState::Paused)),
            Switch::Close => (QueueState::Closed, None),
            Switch::Open => (QueueState::Open, None),
            Switch::Drain => (QueueState::Draining, None),
        }
    }
}

/// What a state switch did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Switched {
    /// The queue.
    pub queue: String,
    /// Its state now.
    pub state: &'static str,
    /// Its state before (`unconfigured` when no scheduler had published).
    pub previous: String,
    /// False when it already was in that state.
    pub changed: bool,
}

/// A queue's schedule after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleNow {
    /// The queue.
    pub queue: String,
    /// When it opens (RFC 3339), if scheduled.
    pub opens_at: Option<String>,
    /// When it stops taking visitors, if scheduled.
    pub closes_at: Option<String>,
    /// Set when the schedule cannot admit anybody (closes before it opens).
    pub warning: Option<String>,
}

/// A queue's notice after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoticeNow {
    /// The queue.
    pub queue: String,
    /// The notice now (None: cleared).
    pub notice: Option<String>,
    /// The notice before (None: there was none).
    pub previous: Option<String>,
}

/// What a reset removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetDone {
    /// The queue.
    pub queue: String,
    /// Keys removed: the line, the pre-queue, the statistics, every
    /// visitor's status and token, the guard's budgets.
    pub removed_keys: u64,
    /// Slots that were still held (admitted visitors whose order had not
    /// settled): non-zero only when forced.
    pub tokens_dropped: u64,
}

/// A new bypass link. `key` is shown once: only its hash is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BypassCreated {
    /// The queue it passes.
    pub queue: String,
    /// Its id (lists, revocation).
    pub id: String,
    /// Who it is for.
    pub name: String,
    /// The secret key (give it to its holder only).
    pub key: String,
    /// The path to open on the shop's site (the edge's
    /// `GET /queue/bypass`): it sets the bypass cookie.
    pub link: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Expires (RFC 3339).
    pub expires_at: String,
}

/// One link as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BypassListed {
    /// Its id.
    pub id: String,
    /// Who it is for.
    pub name: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Expires (RFC 3339).
    pub expires_at: String,
    /// `live`, `expired` or `revoked`.
    pub status: &'static str,
    /// Requests it passed.
    pub uses: u64,
    /// Its last use (RFC 3339), if any.
    pub last_used_at: Option<String>,
}

/// A revoked link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BypassRevoked {
    /// The queue.
    pub queue: String,
    /// Its id.
    pub id: String,
    /// Who it was for.
    pub name: String,
}

/// Mints a bypass link for `name`, living `ttl_minutes`.
pub async fn bypass_create(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    name: &str,
    ttl_minutes: u64,
) -> Result<BypassCreated, ActionError> {
    let q = pick(config, queue)?;
    let name = bypass::check_name(name).map_err(|e| ActionError::BadInput(format!("name: {e}")))?;
    let ttl_ms = ttl_minutes.saturating_mul(60_000);
    if !bypass::TTL_MS.contains(&ttl_ms) {
        return Err(ActionError::BadInput(
            "a bypass lives 1 minute to 7 days (10080 minutes)".into(),
        ));
    }
    let mut random = [0u8; 32];
    getrandom::getrandom(&mut random)
        .map_err(|e| ActionError::BadInput(format!("no randomness from the OS: {e}")))?;
    let key = bypass::mint(random);
    let parts = bypass::parts(&key).ok_or_else(|| ActionError::BadInput("minted key".into()))?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let reply = engine::run(
        conn,
        &Bypass {
            keys: &keys,
            call: BypassCall::Create {
                key: &parts,
                ttl_ms,
                name,
            },
        },
    )
    .await?;
    match reply {
        BypassReply::Created {
            created_ms,
            expires_ms,
        } => Ok(BypassCreated {
            queue: q.id.to_string(),
            id: parts.id,
            name: name.to_string(),
            link: format!("/queue/bypass?queue={}&key={key}", q.id),
            key,
            created_at: config::format_time(created_ms),
            expires_at: config::format_time(expires_ms),
        }),
        BypassReply::Refused(why) if why == "full" => Err(ActionError::Refused(format!(
            "queue {} has {} live bypass links already: revoke some first",
            q.id,
            bypass::MAX_LIVE
        ))),
        other => Err(ActionError::Refused(format!(
            "bypass not created: {other:?}"
        ))),
    }
}

/// Every bypass link of a queue (live, expired within the last day, or
/// revoked), newest first.
pub async fn bypass_list(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
) -> Result<Vec<BypassListed>, ActionError> {
    let q = pick(config, queue)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let redis_err = |e: redis::RedisError| ActionError::Redis(EngineError::Redis(e));
    let all: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(keys.bypass())
        .query_async(conn)
        .await
        .map_err(redis_err)?;
    let now: (u64, u64) = redis::cmd("TIME")
        .query_async(conn)
        .await
        .map_err(redis_err)?;
    let now_ms = now.0 * 1000 + now.1 / 1000;
    let mut links: Vec<Link> = all
        .iter()
        .filter_map(|(id, rec)| Link::parse(id, rec))
        .collect();
    links.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
    Ok(links
        .into_iter()
        .map(|l| BypassListed {
            status: if l.revoked {
                "revoked"
            } else if l.expires_ms <= now_ms {
                "expired"
            } else {
                "live"
            },
            id: l.id,
            name: l.name,
            created_at: config::format_time(l.created_ms),
            expires_at: config::format_time(l.expires_ms),
            uses: l.uses,
            last_used_at: l.last_used_ms.map(config::format_time),
        })
        .collect())
}

/// Ends a bypass link now: its next request queues like anyone's.
pub async fn bypass_revoke(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    id: &str,
) -> Result<BypassRevoked, ActionError> {
    let q = pick(config, queue)?;
    if !bypass::is_id(id) {
        return Err(ActionError::BadInput(
            "a bypass id is 12 hex digits, as `bypass list` shows".into(),
        ));
    }
    let keys = QueueKeys::new(&config.prefix, &q.id);
    match engine::run(
        conn,
        &Bypass {
            keys: &keys,
            call: BypassCall::Revoke { id },
        },
    )
    .await?
    {
        BypassReply::Revoked { name } => Ok(BypassRevoked {
            queue: q.id.to_string(),
            id: id.to_string(),
            name,
        }),
        _ => Err(ActionError::UnknownBypass(format!(
            "queue {} has no bypass {id}",
            q.id
        ))),
    }
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
    pub file: Settings,
    /// The file's with the run-time ones over them: what the lease holder
    /// enforces once it applied this version (if its file is the same).
    pub effective: Settings,
}

fn settings_view(q: &QueueConfig, stored: runtime::Stored, effective: Settings) -> SettingsView {
    SettingsView {
        queue: q.id.to_string(),
        version: stored.version_number(),
        applied_version: stored.applied,
        runtime: stored.values,
        file: q.settings.clone(),
        effective,
    }
}

/// The queue's run-time settings, its file's and those in force.
pub async fn settings_show(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
) -> Result<SettingsView, ActionError> {
    let q = pick(config, queue)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let stored = runtime::read(conn, &keys).await?;
    // Stored settings this file refuses are shown as they are; the
    // holder refuses them too (and logs why).
    let effective = runtime::effective(&q.settings, &stored.values, config.redis.response_timeout)
        .unwrap_or_else(|_| q.settings.clone());
    Ok(settings_view(q, stored, effective))
}

/// Changes run-time settings: each `changes` entry sets a setting, or
/// with `null` removes it (back to the file's), as a JSON merge patch
/// does. The result is checked by every rule the config file is, before
/// anything is written; written only if nobody changed the settings since
/// they were read (else a conflict: read them again). In force at the
/// lease holder's next tick.
pub async fn settings_change(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    changes: &runtime::Values,
) -> Result<SettingsView, ActionError> {
    let q = pick(config, queue)?;
    if changes.is_empty() {
        return Err(ActionError::BadInput(
            "name at least one setting to change".into(),
        ));
    }
    let names = Settings::field_names();
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
    write_settings(conn, &keys, &stored, set, remove).await?;
    let stored = runtime::read(conn, &keys).await?;
    Ok(settings_view(q, stored, effective))
}

/// Removes every run-time setting: the file's are in force again at the
/// lease holder's next tick.
pub async fn settings_clear(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
) -> Result<SettingsView, ActionError> {
    let q = pick(config, queue)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let stored = runtime::read(conn, &keys).await?;
    if !stored.values.is_empty() {
        let remove = stored.values.keys().cloned().collect();
        write_settings(conn, &keys, &stored, Vec::new(), remove).await?;
    }
    let stored = runtime::read(conn, &keys).await?;
    Ok(settings_view(q, stored, q.settings.clone()))
}

async fn write_settings(
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

/// A revocation done (`visitor --revoke` / `POST …/visitors/{id}/revoke`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VisitorRevoked {
    /// The queue.
    pub queue: String,
    /// The visitor.
    pub user: String,
    /// What the visitor had: `waiting`, `pre_queued`, `drawing`,
    /// `admitted`, `in_flight`, `revoked` (revoked again: the time starts
    /// over), `ordered`, `expired`, `abandoned` or `not_in_queue`.
    pub was: String,
    /// How long the visitor is kept out (ms).
    pub for_ms: u64,
}

/// A visitor's id, checked.
fn visitor_id(user: &str) -> Result<queuegate_shared::UserId, ActionError> {
    queuegate_shared::UserId::new(user)
        .map_err(|e| ActionError::BadInput(format!("{user:?} is not a visitor id: {e}")))
}

/// Revokes a visitor: a place in line is removed, a token deleted and its
/// slot freed, a pre-queued place is never drawn; the visitor is kept out
/// for `minutes` (1 to 10080; default: the queue's `status_ttl_ms`, as
/// long as a visit's records live). An order already at the origin is not
/// recalled.
pub async fn visitor_revoke(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    user: &str,
    minutes: Option<u64>,
) -> Result<VisitorRevoked, ActionError> {
    let q = pick(config, queue)?;
    let uid = visitor_id(user)?;
    let for_ms = match minutes {
        None => q.settings.status_ttl_ms.min(MAX_REVOKE_MS),
        Some(m) if (1..=MAX_REVOKE_MS / 60_000).contains(&m) => m * 60_000,
        Some(m) => {
            return Err(ActionError::BadInput(format!(
                "a revocation lasts 1 to {} minutes (7 days), not {m}",
                MAX_REVOKE_MS / 60_000
            )))
        }
    };
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let reply = engine::run(
        conn,
        &Revoke {
            keys: &keys,
            user: &uid,
            call: RevokeCall::Revoke { for_ms },
        },
    )
    .await?;
    match reply {
        RevokeReply::Revoked { was } => Ok(VisitorRevoked {
            queue: q.id.to_string(),
            user: uid.as_str().to_string(),
            was,
            for_ms,
        }),
        other => Err(ActionError::Conflict(format!(
            "the revoke script answered {other:?}"
        ))),
    }
}

/// Lifts a revocation: the visitor may enter again (anew: a place it had
/// is not given back).
pub async fn visitor_lift(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    user: &str,
) -> Result<(), ActionError> {
    let q = pick(config, queue)?;
    let uid = visitor_id(user)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    match engine::run(
        conn,
        &Revoke {
            keys: &keys,
            user: &uid,
            call: RevokeCall::Lift,
        },
    )
    .await?
    {
        RevokeReply::Lifted => Ok(()),
        _ => Err(ActionError::Conflict(format!(
            "visitor {user} of queue {} is not revoked",
            q.id
        ))),
    }
}

/// One visitor as Redis knows them (`visitor` / `GET …/visitors/{id}`).
/// Never the entry token itself: it is a bearer secret.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VisitorView {
    /// The queue.
    pub queue: String,
    /// The visitor (user) id.
    pub user: String,
    /// `waiting`, `pre_queued`, `drawing`, `admitted`, `in_flight`,
    /// `ordered`, `expired`, `abandoned`, or `unknown` (never entered here,
    /// or every record of them has expired).
    pub state: &'static str,
    /// In line: 1 is next.
    pub position: Option<u64>,
    /// In line: the ticket (arrival order).
    pub ticket: Option<u64>,
    /// Holding an order slot: until when (RFC 3339).
    pub slot_until: Option<String>,
    /// The entry token's window and retries, while one is held.
    pub token: Option<TokenView>,
    /// The last change the status record holds (`ISSUED`, `IN_FLIGHT`,
    /// `ORDERED`, `EXPIRED`, `ABANDONED`, `REVOKED`) and when (RFC 3339).
    pub last_change: Option<LastChange>,
    /// The status changes before it and it, oldest first (the newest 16;
    /// from admission on: a place in line is not a status change).
    pub history: Vec<LastChange>,
    /// How long Redis keeps that record (ms), if set.
    pub record_ttl_ms: Option<u64>,
}

/// The last change of a visitor's status record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LastChange {
    /// `ISSUED`, `IN_FLIGHT`, `ORDERED`, `EXPIRED`, `ABANDONED` or
    /// `REVOKED`.
    pub status: String,
    /// When (RFC 3339).
    pub at: String,
}

/// An entry token's times, without the token.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenView {
    /// Usable from (RFC 3339).
    pub activates_at: String,
    /// Usable until (RFC 3339).
    pub expires_at: String,
    /// Times it came back after a failed order.
    pub restores: u64,
}

/// Looks `user` up in `queue`: where they stand, their token's window (not
/// the token), the last change of their status. Read-only: one pipeline of
/// plain reads, nothing marked seen.
pub async fn visitor(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    user: &str,
) -> Result<VisitorView, ActionError> {
    use queuegate_shared::fields::{status as st, SEPARATOR};
    let q = pick(config, queue)?;
    let uid = visitor_id(user)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    type Reads = (
        Option<u64>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        Option<f64>,
        Option<String>,
        i64,
        Option<String>,
        Vec<String>,
    );
    let (rank, ticket, pre, draw, slot, status, ttl, token, history): Reads = redis::pipe()
        .cmd("ZRANK")
        .arg(keys.waiting())
        .arg(uid.as_str())
        .cmd("ZSCORE")
        .arg(keys.waiting())
        .arg(uid.as_str())
        .cmd("ZSCORE")
        .arg(keys.pre())
        .arg(uid.as_str())
        .cmd("ZSCORE")
        .arg(keys.draw())
        .arg(uid.as_str())
        .cmd("ZSCORE")
        .arg(keys.active())
        .arg(uid.as_str())
        .cmd("GET")
        .arg(keys.status(&uid))
        .cmd("PTTL")
        .arg(keys.status(&uid))
        .cmd("GET")
        .arg(keys.token(&uid))
        .cmd("LRANGE")
        .arg(keys.history(&uid))
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .map_err(|e| ActionError::Redis(EngineError::Redis(e)))?;
    let time = |ms: f64| config::format_time(ms as u64);
    let status_parts: Vec<String> = status
        .as_deref()
        .map(|s| s.split(SEPARATOR).map(str::to_string).collect())
        .unwrap_or_default();
    let kind = status_parts.first().map(String::as_str);
    let state = if rank.is_some() {
        "waiting"
    } else if pre.is_some() {
        "pre_queued"
    } else if draw.is_some() {
        "drawing"
    } else {
        match kind {
            Some(k) if k == st::ISSUED => "admitted",
            Some(k) if k == st::IN_FLIGHT => "in_flight",
            Some(k) if k == st::ORDERED => "ordered",
            Some(k) if k == st::EXPIRED => "expired",
            Some(k) if k == st::ABANDONED => "abandoned",
            Some(k) if k == st::REVOKED => "revoked",
            _ => "unknown",
        }
    };
    // `token|activateAt|expiresAt|restores`: everything but the token.
    let token = token.and_then(|t| {
        let f: Vec<&str> = t.split(SEPARATOR).collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        Some(TokenView {
            activates_at: config::format_time(num(1)?),
            expires_at: config::format_time(num(2)?),
            restores: num(3).unwrap_or(0),
        })
    });
    let change = |kind: &str, at: &str| {
        at.parse::<u64>().ok().map(|at| LastChange {
            status: kind.to_string(),
            at: config::format_time(at),
        })
    };
    let last_change = match status_parts.as_slice() {
        [kind, at, ..] => change(kind, at),
        _ => None,
    };
    let history = history
        .iter()
        .filter_map(|entry| entry.split_once(SEPARATOR))
        .filter_map(|(kind, at)| change(kind, at))
        .collect();
    Ok(VisitorView {
        queue: q.id.to_string(),
        user: uid.as_str().to_string(),
        state,
        position: rank.map(|r| r + 1),
        ticket: ticket.map(|t| t as u64),
        slot_until: slot.map(time),
        token,
        last_change,
        history,
        record_ttl_ms: u64::try_from(ttl).ok(),
    })
}

/// The named queue, or the only one.
pub fn pick<'a>(config: &'a Config, queue: Option<&str>) -> Result<&'a QueueConfig, ActionError> {
    let ids = || {
        config
            .queues
            .iter()
            .map(|q| q.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match queue {
        Some(id) => config.queue(id).ok_or_else(|| {
            ActionError::UnknownQueue(format!(
                "queue {id:?} is not in {}; configured: {}",
                config.origin,
                ids()
            ))
        }),
        None if config.queues.len() == 1 => Ok(&config.queues[0]),
        None => Err(ActionError::BadInput(format!(
            "name a queue; configured: {}",
            ids()
        ))),
    }
}

/// The status of `queue`, or of every configured queue.
pub async fn status(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
) -> Result<Vec<QueueStatus>, ActionError> {
    let queues: Vec<&QueueConfig> = match queue {
        Some(_) => vec![pick(config, queue)?],
        None => config.queues.iter().collect(),
    };
    let mut all = Vec::new();
    for q in queues {
        all.push(read_status(conn, &QueueKeys::new(&config.prefix, &q.id)).await?);
    }
    Ok(all)
}

/// Switches a queue's state.
pub async fn switch(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    switch: Switch,
) -> Result<Switched, ActionError> {
    let q = pick(config, queue)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let (state, expect) = switch.target();
    let name = |s: Option<QueueState>| s.map_or("unconfigured", QueueState::as_str);
    let reply = engine::run(
        conn,
        &SetState {
            keys: &keys,
            state,
            expect,
        },
    )
    .await?;
    match reply {
        StateSwitch::Switched(previous) => Ok(Switched {
            queue: q.id.to_string(),
            state: state.as_str(),
            previous: name(previous).to_string(),
            changed: previous != Some(state),
        }),
        StateSwitch::Refused(Some(current)) if current == state => Ok(Switched {
            queue: q.id.to_string(),
            state: state.as_str(),
            previous: state.as_str().to_string(),
            changed: false,
        }),
        StateSwitch::Refused(current) => Err(ActionError::Refused(format!(
            "queue {} is {}, not {}; use `open` to reopen it",
            q.id,
            name(current),
            name(expect),
        ))),
    }
}

/// How the caller names the schedule's inputs: the CLI's flags, or the
/// API's JSON fields.
pub type Names = [&'static str; 3];
/// The CLI's flags.
pub const FLAGS: Names = ["--opens-at", "--closes-at", "--clear"];
/// The API's fields.
pub const FIELDS: Names = ["opens_at", "closes_at", "clear"];

/// The opening and closing asked for (RFC 3339 times with an offset, or
/// `clear` for neither), validated before Redis is asked; errors use
/// `names` for the inputs.
pub fn schedule_change(
    opens_at: Option<&str>,
    closes_at: Option<&str>,
    clear: bool,
    [open_name, close_name, clear_name]: Names,
) -> Result<(Change, Change), ActionError> {
    if clear {
        if opens_at.is_some() || closes_at.is_some() {
            return Err(ActionError::BadInput(format!(
                "{clear_name} takes no {open_name} or {close_name}"
            )));
        }
        return Ok((Change::Clear, Change::Clear));
    }
    let time = |t: Option<&str>, name: &str| -> Result<Change, ActionError> {
        t.map_or(Ok(Change::Keep), |t| {
            config::parse_time(t)
                .map(Change::Set)
                .map_err(|e| ActionError::BadInput(format!("{name}: {e}")))
        })
    };
    let change = (time(opens_at, open_name)?, time(closes_at, close_name)?);
    match change {
        (Change::Keep, Change::Keep) => Err(ActionError::BadInput(format!(
            "give {open_name}, {close_name} or {clear_name}"
        ))),
        (Change::Set(open), Change::Set(close)) if close <= open => Err(ActionError::Conflict(
            format!("{close_name} must be after {open_name}"),
        )),
        _ => Ok(change),
    }
}

/// Changes a queue's scheduled opening and closing.
pub async fn schedule(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    (opens_at, closes_at): (Change, Change),
) -> Result<ScheduleNow, ActionError> {
    let q = pick(config, queue)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let now = engine::run(
        conn,
        &Schedule {
            keys: &keys,
            opens_at,
            closes_at,
        },
    )
    .await?;
    let warning = match (now.opens_at, now.closes_at) {
        (Some(open), Some(close)) if close <= open => {
            Some("the queue closes before it opens; nobody can enter".to_string())
        }
        _ => None,
    };
    Ok(ScheduleNow {
        queue: q.id.to_string(),
        opens_at: now.opens_at.map(config::format_time),
        closes_at: now.closes_at.map(config::format_time),
        warning,
    })
}

/// Empties a closed queue for a rehearsal: its line, pre-queue and draw,
/// statistics, visitors' statuses and tokens, the guard's budgets and the
/// origin's recent answers; its settings, state, schedule, notice, bypass
/// links and the lease stay. Refused unless the queue is closed (visitors entering or
/// being admitted meanwhile would leave half a line), and while admitted
/// visitors hold slots (tokens in flight) unless `force`.
pub async fn reset(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    force: bool,
) -> Result<ResetDone, ActionError> {
    let q = pick(config, queue)?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let redis_err = |e: redis::RedisError| ActionError::Redis(EngineError::Redis(e));
    let state: Option<String> = redis::cmd("HGET")
        .arg(keys.config())
        .arg(cf::STATE)
        .query_async(conn)
        .await
        .map_err(redis_err)?;
    if state.as_deref() != Some(QueueState::Closed.as_str()) {
        return Err(ActionError::Refused(format!(
            "queue {} is {}: close it first (`close {}`), so nobody enters or is admitted while it is emptied",
            q.id,
            state.as_deref().unwrap_or("unconfigured"),
            q.id
        )));
    }
    let held: u64 = redis::cmd("ZCARD")
        .arg(keys.active())
        .query_async(conn)
        .await
        .map_err(redis_err)?;
    if held > 0 && !force {
        return Err(ActionError::Refused(format!(
            "queue {} has {held} admitted visitors holding a slot (tokens in flight); wait until they order or their slots expire, or force the reset",
            q.id
        )));
    }
    // The operator's own: settings, state, schedule and notice (config),
    // the run-time settings, the lease, and the staff's bypass links (a
    // rehearsal keeps them).
    let keep = [keys.config(), keys.lock(), keys.bypass(), keys.settings()];
    // Glob specials cannot occur in a prefix or a queue id; the hash tag's
    // braces are not special.
    let pattern = format!("{}*", keys.base());
    let mut cursor = 0u64;
    let mut removed = 0u64;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000);
        let reply = conn
            .on_slot_of(&keys.config(), &scan)
            .await
            .map_err(redis_err)?;
        let (next, found): (u64, Vec<String>) =
            redis::from_redis_value(reply).map_err(|e| redis_err(e.into()))?;
        let doomed: Vec<&String> = found.iter().filter(|k| !keep.contains(k)).collect();
        if !doomed.is_empty() {
            let n: u64 = redis::cmd("UNLINK")
                .arg(&doomed)
                .query_async(conn)
                .await
                .map_err(redis_err)?;
            removed += n;
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    Ok(ResetDone {
        queue: q.id.to_string(),
        removed_keys: removed,
        tokens_dropped: held,
    })
}

/// Sets (`text`) or clears (None) a queue's notice; a notice that is not
/// one short line of text is refused before Redis is asked.
pub async fn notice(
    config: &Config,
    conn: &mut RedisConn,
    queue: Option<&str>,
    text: Option<&str>,
) -> Result<NoticeNow, ActionError> {
    let q = pick(config, queue)?;
    let text = text
        .map(queuegate_shared::notice::check)
        .transpose()
        .map_err(|e| ActionError::BadInput(format!("notice: {e}")))?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let before = engine::run(
        conn,
        &SetNotice {
            keys: &keys,
            notice: text,
        },
    )
    .await?;
    Ok(NoticeNow {
        queue: q.id.to_string(),
        notice: text.map(str::to_string),
        previous: Some(before).filter(|b| !b.is_empty()),
    })
}

/// What `status` shows of one queue (the JSON of `status --json`).
#[derive(Debug, serde::Serialize)]
pub struct QueueStatus {
    pub queue: String,
    pub state: Option<String>,
    pub waiting: u64,
    pub active: u64,
    pub max_active: Option<u64>,
    pub admitted_per_second: Option<f64>,
    pub lease_holder: Option<String>,
    pub lease_ttl_ms: Option<u64>,
    pub opens_at: Option<String>,
    pub closes_at: Option<String>,
    pub pre_queued: u64,
    pub drawing: u64,
    pub origin: OriginStatus,
    pub stats: BTreeMap<String, i64>,
    pub notice: Option<String>,
}

/// Origin control as the lease holder last recorded it.
#[derive(Debug, Default, serde::Serialize)]
pub struct OriginStatus {
    pub control: Option<bool>,
    pub target_rate_per_second: Option<f64>,
    pub max_rate_per_second: Option<f64>,
    pub min_rate_per_second: Option<f64>,
    pub error_share: Option<f64>,
    pub p95_ms: Option<f64>,
}

impl OriginStatus {
    /// From the queue's config hash.
    pub fn of(config: &BTreeMap<String, String>) -> OriginStatus {
        let num = |field: &str| config.get(field).and_then(|v| v.parse::<f64>().ok());
        OriginStatus {
            control: config.get(cf::ORIGIN_CONTROL).and_then(|v| v.parse().ok()),
            target_rate_per_second: num(cf::TARGET_RATE),
            max_rate_per_second: num(cf::ADMIT_RATE_PER_SECOND),
            min_rate_per_second: num(cf::MIN_ADMIT_RATE_PER_SECOND),
            error_share: num(cf::ORIGIN_ERROR_SHARE),
            p95_ms: num(cf::ORIGIN_P95_MS),
        }
    }

    /// One line for `status`.
    pub fn line(&self) -> String {
        let max = self
            .max_rate_per_second
            .map_or("?".to_string(), |m| format!("{m:.1}"));
        if self.control == Some(false) {
            return format!("control off: fixed {max}/s");
        }
        let target = self
            .target_rate_per_second
            .map_or("not measured yet".to_string(), |t| format!("{t:.1}/s"));
        let min = self
            .min_rate_per_second
            .map_or("?".to_string(), |m| format!("{m:.1}"));
        let errors = self
            .error_share
            .map_or("no answers".to_string(), |e| format!("{:.1} %", e * 100.0));
        let p95 = self
            .p95_ms
            .map_or("-".to_string(), |p| format!("{p:.0} ms"));
        format!("target {target} (min {min}, max {max}) · errors {errors} · p95 {p95}")
    }
}

async fn read_status(conn: &mut RedisConn, keys: &QueueKeys) -> Result<QueueStatus, ActionError> {
    let s = engine::run(conn, &Status { keys }).await?;
    Ok(QueueStatus {
        queue: keys.queue().to_string(),
        state: s.config.get(cf::STATE).cloned(),
        waiting: s.waiting,
        active: s.active,
        max_active: s.setting(cf::MAX_ACTIVE),
        admitted_per_second: s.measured_rate(),
        lease_ttl_ms: s.lease.as_ref().map(|(_, ttl)| *ttl),
        lease_holder: s.lease.as_ref().map(|(holder, _)| holder.clone()),
        opens_at: s.scheduled(cf::OPENS_AT).map(config::format_time),
        closes_at: s.scheduled(cf::CLOSES_AT).map(config::format_time),
        pre_queued: s.pre_queued,
        drawing: s.drawing(),
        origin: OriginStatus::of(&s.config),
        stats: s.counters(),
        notice: s.config.get(cf::NOTICE).cloned(),
    })
}
