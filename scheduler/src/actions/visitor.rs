//! `visitor`: look one visitor up — where they stand, their token's window
//! (never the token), their status changes — through the typed `visitor`
//! script ([`VisitorRead`]).

use queuegate_shared::fields::status as st;
use queuegate_shared::ops::{StatusChange, VisitorRead, VisitorRecords};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, visitor_id, ActionError};
use crate::config::{self, Config};
use crate::connect::RedisConn;
use crate::engine;

/// Look a visitor up (read-only: nothing is marked seen).
#[derive(Debug, Clone)]
pub struct Visitor {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// The visitor's id.
    pub user: String,
}

/// One visitor as Redis knows them (`visitor` / `GET …/visitors/{id}`).
/// Never the entry token itself: it is a bearer secret.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VisitorView {
    /// The queue.
    pub queue: String,
    /// The visitor (user) id.
    pub user: String,
    /// `waiting`, `pre_queued`, `drawing`, `claimed` (passed over asleep
    /// at the head, within its sleep grace), `admitted`, `in_flight`,
    /// `ordered`, `expired`, `abandoned`, `revoked`, or `unknown` (never
    /// entered here, or every record of them has expired).
    pub state: &'static str,
    /// In line: 1 is next.
    pub position: Option<u64>,
    /// In line, or holding a claim: the ticket (arrival order).
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

impl From<&StatusChange> for LastChange {
    fn from(c: &StatusChange) -> Self {
        LastChange {
            status: c.kind.clone(),
            at: config::format_time(c.at),
        }
    }
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

impl Visitor {
    /// Looks the visitor up in one script call.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<VisitorView, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let uid = visitor_id(&self.user)?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let r = engine::run(
            conn,
            &VisitorRead {
                keys: &keys,
                user: &uid,
            },
        )
        .await?;
        Ok(VisitorView {
            queue: q.id.to_string(),
            user: uid.as_str().to_string(),
            state: state(&r),
            position: r.rank.map(|r| r + 1),
            ticket: r.ticket,
            slot_until: r.slot_until.map(config::format_time),
            token: r.token.map(|t| TokenView {
                activates_at: config::format_time(t.activate_at),
                expires_at: config::format_time(t.expires_at),
                restores: t.restores,
            }),
            last_change: r.status.as_ref().map(LastChange::from),
            history: r.history.iter().map(LastChange::from).collect(),
            record_ttl_ms: r.status_ttl_ms,
        })
    }
}

/// Where the visitor stands: a place first, else the status record's kind.
fn state(r: &VisitorRecords) -> &'static str {
    if r.rank.is_some() {
        return "waiting";
    }
    if r.pre_queued {
        return "pre_queued";
    }
    if r.drawing {
        return "drawing";
    }
    match r.status.as_ref().map(|s| s.kind.as_str()) {
        Some(st::ISSUED) => "admitted",
        Some(st::IN_FLIGHT) => "in_flight",
        Some(st::ORDERED) => "ordered",
        Some(st::EXPIRED) => "expired",
        Some(st::ABANDONED) => "abandoned",
        // Passed over asleep at the head: a claim within the sleep grace.
        Some(st::CLAIMED) => "claimed",
        Some(st::REVOKED) => "revoked",
        _ => "unknown",
    }
}
