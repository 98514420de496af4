//! What the edge tells a visitor: one JSON shape whose `state` decides which
//! fields are present (the edge API in docs/openapi.yaml and docs/edge.md).

use serde::Serialize;

/// A visitor's state in a queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    tag = "state",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum UserState {
    /// In line.
    Waiting {
        /// 1-based; 1 is next.
        position: u64,
        /// Seconds until admission; absent while the queue is paused.
        #[serde(skip_serializing_if = "Option::is_none")]
        eta_seconds: Option<u64>,
        /// When to poll again.
        retry_after_ms: u64,
        /// The position and ETA are the edge's estimate for a visitor far
        /// from the head (docs/uncapped-line.md), not the exact rank;
        /// absent when exact.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        approximate: bool,
    },
    /// Before a scheduled opening: places are drawn at random at the
    /// opening (and while the draw runs, just after it).
    PreQueue {
        /// Epoch ms of the opening.
        opens_at: u64,
        /// When to poll again: the opening plus a random share of the
        /// spread window, or sooner to stay alive while it is far off.
        retry_after_ms: u64,
    },
    /// Holds an entry token.
    Admitted {
        /// The one-time token for the protected route.
        token: String,
        /// Epoch ms from which the token is accepted.
        activate_at: u64,
        /// Epoch ms at which it lapses.
        expires_at: u64,
    },
    /// The token was used; the origin has not answered yet.
    InFlight,
    /// The order went through.
    Ordered,
    /// A token was issued and not used in time.
    Expired,
    /// Stopped polling and was dropped from the line.
    Abandoned,
    /// An operator revoked the visitor's place or token; it cannot enter
    /// again until the revocation ends.
    Revoked,
    /// Never entered (or everything about the visit has expired).
    NotInQueue,
    /// The queue's stock is gone (docs/drop-day.md, *Stock*): no new
    /// place and no order. A visitor in line keeps its place, in case the
    /// stock is raised again, and keeps polling.
    SoldOut {
        /// When to poll again.
        retry_after_ms: u64,
    },
}

impl UserState {
    /// The `state` field's value.
    pub fn name(&self) -> &'static str {
        match self {
            UserState::Waiting { .. } => "waiting",
            UserState::PreQueue { .. } => "pre_queue",
            UserState::Admitted { .. } => "admitted",
            UserState::InFlight => "in_flight",
            UserState::Ordered => "ordered",
            UserState::Expired => "expired",
            UserState::Abandoned => "abandoned",
            UserState::Revoked => "revoked",
            UserState::NotInQueue => "not_in_queue",
            UserState::SoldOut { .. } => "sold_out",
        }
    }
}

/// The body of `POST /queue/enter` and `GET /queue/position`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateReply {
    /// The visitor's state and its fields.
    #[serde(flatten)]
    pub state: UserState,
    /// The queue id.
    pub queue: String,
    /// The operator's notice to the line, if any (`queuegate-scheduler
    /// notice`): plain text for the page to show.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// A waiting visitor's chance, in percent, that stock remains at its
    /// turn (`crate::stock::chance`), sent as a share in [0, 1]; absent
    /// when the queue keeps no stock.
    #[serde(
        rename = "chance",
        skip_serializing_if = "Option::is_none",
        serialize_with = "percent_as_share"
    )]
    pub chance_percent: Option<u8>,
}

fn percent_as_share<S: serde::Serializer>(p: &Option<u8>, s: S) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_f64(f64::from(*p) / 100.0),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_matches_the_edge_contract() {
        let waiting = StateReply {
            state: UserState::Waiting {
                position: 1204,
                eta_seconds: Some(7),
                retry_after_ms: 5000,
                approximate: false,
            },
            queue: "main".into(),
            notice: None,
            chance_percent: None,
        };
        assert_eq!(
            serde_json::to_value(&waiting).unwrap(),
            json!({"state":"waiting","queue":"main","position":1204,"etaSeconds":7,"retryAfterMs":5000})
        );
        let far = StateReply {
            state: UserState::Waiting {
                position: 412_000,
                eta_seconds: Some(2_355),
                retry_after_ms: 30_000,
                approximate: true,
            },
            queue: "main".into(),
            notice: None,
            chance_percent: None,
        };
        assert_eq!(
            serde_json::to_value(&far).unwrap(),
            json!({"state":"waiting","queue":"main","position":412_000,"etaSeconds":2_355,"retryAfterMs":30_000,"approximate":true})
        );
        let pre = StateReply {
            state: UserState::PreQueue {
                opens_at: 1_764_770_400_000,
                retry_after_ms: 15_000,
            },
            queue: "main".into(),
            notice: None,
            chance_percent: None,
        };
        assert_eq!(
            serde_json::to_value(&pre).unwrap(),
            json!({"state":"pre_queue","queue":"main","opensAt":1_764_770_400_000u64,"retryAfterMs":15000})
        );
        let admitted = StateReply {
            state: UserState::Admitted {
                token: "t".into(),
                activate_at: 1,
                expires_at: 2,
            },
            queue: "main".into(),
            notice: None,
            chance_percent: None,
        };
        assert_eq!(
            serde_json::to_value(&admitted).unwrap(),
            json!({"state":"admitted","queue":"main","token":"t","activateAt":1,"expiresAt":2})
        );
        for s in [
            UserState::InFlight,
            UserState::Ordered,
            UserState::Expired,
            UserState::Abandoned,
            UserState::Revoked,
            UserState::NotInQueue,
        ] {
            let v = serde_json::to_value(StateReply {
                state: s.clone(),
                queue: "q".into(),
                notice: None,
                chance_percent: None,
            })
            .unwrap();
            assert_eq!(v, json!({"state": s.name(), "queue": "q"}));
        }
    }

    #[test]
    fn sold_out_and_the_chance_follow_the_contract() {
        let sold_out = StateReply {
            state: UserState::SoldOut {
                retry_after_ms: 30_000,
            },
            queue: "main".into(),
            notice: None,
            chance_percent: None,
        };
        assert_eq!(
            serde_json::to_value(&sold_out).unwrap(),
            json!({"state":"sold_out","queue":"main","retryAfterMs":30000})
        );
        let waiting = StateReply {
            state: UserState::Waiting {
                position: 9,
                eta_seconds: None,
                retry_after_ms: 1000,
                approximate: false,
            },
            queue: "main".into(),
            notice: None,
            chance_percent: Some(42),
        };
        assert_eq!(serde_json::to_value(&waiting).unwrap()["chance"], 0.42);
    }

    #[test]
    fn a_notice_rides_along_only_when_set() {
        let reply = |notice: Option<&str>| {
            serde_json::to_value(StateReply {
                state: UserState::NotInQueue,
                queue: "main".into(),
                notice: notice.map(String::from),
                chance_percent: None,
            })
            .unwrap()
        };
        assert!(reply(None).get("notice").is_none());
        assert_eq!(
            reply(Some("S and M sold out"))["notice"],
            "S and M sold out"
        );
    }
}
