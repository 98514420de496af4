//! `visitor`: what the operator's `visitor` lookup shows of one visitor —
//! place, slot, token window, status record and its history — read in one
//! script call, the records decoded by their layouts in [`fields`](crate::fields).

use crate::fields::{status_record, token_record, SEPARATOR};
use crate::keys::{QueueKeys, UserId};
use crate::script::{Invocation, Operation, VISITOR};
use crate::value::{DecodeError, Value};

/// Read one visitor's records (read-only: nothing is marked seen).
#[derive(Debug, Clone, Copy)]
pub struct VisitorRead<'a> {
    /// The visitor's queue.
    pub keys: &'a QueueKeys,
    /// The visitor.
    pub user: &'a UserId,
}

/// One visitor as Redis knows them. Never the entry token: it is a bearer
/// secret, so the decoder drops it.
#[derive(Debug, Clone, PartialEq)]
pub struct VisitorRecords {
    /// In line: 0 is next.
    pub rank: Option<u64>,
    /// In line, or holding a claim (status `CLAIMED`): the ticket
    /// (arrival order).
    pub ticket: Option<u64>,
    /// In the pre-queue (before a scheduled opening).
    pub pre_queued: bool,
    /// In the draw that places the pre-queue at the opening.
    pub drawing: bool,
    /// Holding an order slot: until when (epoch ms).
    pub slot_until: Option<u64>,
    /// The status record's latest change, if it has one.
    pub status: Option<StatusChange>,
    /// How long Redis keeps the status record (ms), if it has a TTL.
    pub status_ttl_ms: Option<u64>,
    /// The entry token's window, while one is held.
    pub token: Option<TokenWindow>,
    /// The status changes, oldest first (the newest
    /// [`HISTORY_KEEP`](crate::fields::HISTORY_KEEP)).
    pub history: Vec<StatusChange>,
}

/// One status change: its kind (one of [`fields::status`](crate::fields::status))
/// and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusChange {
    /// `ISSUED`, `IN_FLIGHT`, `ORDERED`, `EXPIRED`, `ABANDONED`,
    /// `CLAIMED`, `RETURNED`, `REVOKED`.
    pub kind: String,
    /// Epoch ms.
    pub at: u64,
}

impl StatusChange {
    /// From a status record or a history entry (both begin `kind|at`);
    /// None when its time is not a number.
    pub fn parse(record: &str) -> Option<StatusChange> {
        Some(StatusChange {
            kind: field(record, status_record::KIND)?.to_string(),
            at: field(record, status_record::AT)?.parse().ok()?,
        })
    }
}

/// An entry token record's times, without the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenWindow {
    /// Epoch ms from which the token is accepted.
    pub activate_at: u64,
    /// Epoch ms at which it lapses.
    pub expires_at: u64,
    /// How often it was given back after an origin failure.
    pub restores: u64,
}

impl TokenWindow {
    /// From a token record; None without both times.
    pub fn parse(record: &str) -> Option<TokenWindow> {
        let num = |i| field(record, i)?.parse::<u64>().ok();
        Some(TokenWindow {
            activate_at: num(token_record::ACTIVATE_AT)?,
            expires_at: num(token_record::EXPIRES_AT)?,
            restores: num(token_record::RESTORES).unwrap_or(0),
        })
    }
}

/// The `index`th (1-based, as the layouts and Lua count) field of a record.
fn field(record: &str, index: usize) -> Option<&str> {
    record.split(SEPARATOR).nth(index.checked_sub(1)?)
}

impl Operation for VisitorRead<'_> {
    type Reply = VisitorRecords;

    fn invocation(&self) -> Invocation {
        let (k, u) = (self.keys, self.user);
        Invocation {
            script: &VISITOR,
            keys: vec![
                k.waiting(),
                k.pre(),
                k.draw(),
                k.active(),
                k.token(u),
                k.status(u),
                k.history(u),
                k.claims(),
            ],
            args: vec![u.as_str().to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<VisitorRecords, DecodeError> {
        let items = value.into_array("visitor")?;
        let [rank, ticket, pre, draw, slot, status, ttl, token, history] =
            <[Value; 9]>::try_from(items).map_err(|items| {
                DecodeError::new("visitor", format!("expected 9 fields, got {}", items.len()))
            })?;
        // A score is a number or nil (not a member); ticket and slot
        // scores are whole numbers.
        let score = |v: &Value| v.as_f64().map(|f| f as u64);
        let text = |v: &Value, what: &str| {
            v.as_text()
                .map(str::to_string)
                .ok_or_else(|| DecodeError::new("visitor", format!("{what} is not text")))
        };
        let ttl = ttl
            .as_i64()
            .ok_or_else(|| DecodeError::new("visitor", "the status pttl is not an integer"))?;
        let Value::Array(history) = history else {
            return Err(DecodeError::new("visitor", "the history is not an array"));
        };
        let history = history
            .iter()
            .map(|entry| text(entry, "a history entry"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(VisitorRecords {
            rank: rank.as_i64().and_then(|r| u64::try_from(r).ok()),
            ticket: score(&ticket),
            pre_queued: pre != Value::Nil,
            drawing: draw != Value::Nil,
            slot_until: score(&slot),
            status: StatusChange::parse(&text(&status, "the status record")?),
            status_ttl_ms: u64::try_from(ttl).ok(),
            token: TokenWindow::parse(&text(&token, "the token record")?),
            history: history
                .iter()
                .filter_map(|h| StatusChange::parse(h))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Prefix, QueueId};

    fn data(s: &str) -> Value {
        Value::Data(s.as_bytes().to_vec())
    }

    fn read(value: Value) -> Result<VisitorRecords, DecodeError> {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main").unwrap());
        let user = UserId::new("u1").unwrap();
        let op = VisitorRead {
            keys: &keys,
            user: &user,
        };
        let inv = op.invocation();
        assert_eq!(inv.keys.len(), 8);
        assert!(inv.keys[6].ends_with("history:u1"), "{:?}", inv.keys);
        assert_eq!(inv.args, vec!["u1".to_string()]);
        op.decode(value)
    }

    #[test]
    fn an_admitted_visitor_decodes_without_the_token() {
        let token = "ab".repeat(16);
        let r = read(Value::Array(vec![
            Value::Nil,
            Value::Nil,
            Value::Nil,
            Value::Nil,
            data("1764770460000"),
            data("ISSUED|1764770400000"),
            Value::Int(86_400_000),
            data(&format!("{token}|1764770401000|1764770520000|1")),
            Value::Array(vec![data("ISSUED|1764770400000"), data("odd")]),
        ]))
        .unwrap();
        assert_eq!(
            (r.rank, r.ticket, r.pre_queued, r.drawing),
            (None, None, false, false)
        );
        assert_eq!(r.slot_until, Some(1_764_770_460_000));
        let issued = StatusChange {
            kind: "ISSUED".into(),
            at: 1_764_770_400_000,
        };
        assert_eq!(r.status, Some(issued.clone()));
        assert_eq!(r.history, vec![issued], "an unreadable entry is skipped");
        assert_eq!(r.status_ttl_ms, Some(86_400_000));
        assert_eq!(
            r.token,
            Some(TokenWindow {
                activate_at: 1_764_770_401_000,
                expires_at: 1_764_770_520_000,
                restores: 1
            })
        );
        assert!(!format!("{r:?}").contains(&token), "never the token");
    }

    #[test]
    fn a_waiting_visitor_and_odd_replies() {
        let r = read(Value::Array(vec![
            Value::Int(4),
            data("1207"),
            Value::Nil,
            data("3"),
            Value::Nil,
            data(""),
            Value::Int(-2),
            data(""),
            Value::Array(vec![]),
        ]))
        .unwrap();
        assert_eq!((r.rank, r.ticket, r.drawing), (Some(4), Some(1207), true));
        assert_eq!((r.status, r.status_ttl_ms, r.token), (None, None, None));
        assert!(
            read(Value::Array(vec![Value::Nil; 8])).is_err(),
            "too short"
        );
        let mut bad = vec![Value::Nil; 9];
        bad[5] = data("");
        bad[6] = Value::Int(-2);
        bad[7] = data("");
        bad[8] = data("not a list");
        assert!(read(Value::Array(bad)).is_err());
    }
}
