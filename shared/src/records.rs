//! The shapes that cross between the scripts and Rust: the config fields
//! every script reads, the admit script's arguments and reply, and the
//! waiting, pre-queue and admitted replies. Declared once here; the scripts
//! index them through the generated Lua locals, Rust through these
//! positions, so a moved or added field moves on both sides.

use crate::fields::{config, status_record, token_record, SEPARATOR};

/// The config fields the prelude's `read_config` reads for every script
/// that calls it (a script adds its own after them): what the shared
/// replies and the drop-day helpers need. The script reads them back by
/// field name (`cfg[CF_STATE]`), never by position.
pub const CONFIG_READ: [&str; 18] = [
    config::STATE,
    config::MAX_WAITING,
    config::ABANDON_AFTER_MS,
    config::SLEEP_GRACE_MS,
    config::STATUS_TTL_MS,
    config::ADMIT_RATE_PER_SECOND,
    config::POLL_MIN_MS,
    config::POLL_MAX_MS,
    config::MEASURED_RATE,
    config::OPENS_AT,
    config::CLOSES_AT,
    config::DRAW_BASE,
    config::DRAW_END,
    config::DRAW_LEFT,
    config::OPENING_SPREAD_MS,
    config::SEEN_PREV,
    config::GRACE_PREV,
    config::STOCK_LEFT,
];

record!(
    /// The admit script's ARGV.
    admit_arg, "AA" {
        /// The caller's lease owner id (fencing).
        OWNER,
        /// The key base `<prefix>:{<queue>}:`.
        BASE,
        /// The most admissions the caller asks for this tick.
        ALLOWANCE,
        /// Setting: order slots.
        MAX_ACTIVE,
        /// Setting: how long an entry token is valid.
        TOKEN_TTL_MS,
        /// Setting: how long a status record lives.
        STATUS_TTL_MS,
        /// Setting: a waiting user silent this long is not admitted.
        ABANDON_AFTER_MS,
        /// The sleep grace in force (at least `ABANDON_AFTER_MS`).
        SLEEP_GRACE_MS,
        /// Setting: the most users a sweep pops per tick.
        SWEEP_LIMIT,
        /// Setting: near-zone tickets checked for leavers per tick.
        LEAVER_SCAN,
        /// The measured admissions per second for the ETA ('' keeps the
        /// recorded one).
        MEASURED_RATE,
        /// How long the lease is extended by.
        LEASE_TTL_MS,
        /// Setting: the per-address refill.
        BUDGET_PER_MINUTE,
        /// Setting: the per-address burst.
        BUDGET_BURST,
        /// The admissions per second in force: the shared rate bucket
        /// refills at it, and it is recorded as `rate_now`.
        RATE,
        /// Setting: the scheduler tick (sizes the shared rate bucket).
        TICK_MS,
        /// The near zone's size in visitors.
        NEAR_ZONE,
        /// The exact head's size in visitors (0: none).
        EXACT_HEAD,
        /// The idle lease TTL ('' none): a tick that leaves the queue idle
        /// extends the lease by it instead.
        IDLE_LEASE_TTL_MS,
        /// The first grant: from here on, pairs of token and activation
        /// jitter ms, one per possible admission.
        GRANTS,
    }
);

record!(
    /// The admit script's reply (all integers).
    admit_reply, "AR" {
        /// 1 ran · 2 not admitting (paused/closed) · 3 a draw runs · 0 not
        /// the lease owner (nothing changed).
        CODE,
        /// Users given a token.
        ADMITTED,
        /// Slots freed from unused tokens.
        EXPIRED,
        /// Slots freed from consumes the origin never settled.
        LAPSED,
        /// Leavers dropped (from the line or their claims).
        ABANDONED,
        /// Users still waiting.
        WAITING,
        /// Slots in use.
        ACTIVE,
        /// Total: entries refused for the address budget.
        REFUSED_BUDGET,
        /// Total: entries refused without a proof-of-work solution.
        REFUSED_CHALLENGE,
        /// Total: entries refused for a reused solution.
        REFUSED_REUSED,
        /// Total: entries refused without a Turnstile token.
        REFUSED_TURNSTILE,
        /// Visitors in the pre-queue.
        PRE_QUEUED,
        /// Total: entries refused for a stale solution.
        REFUSED_STALE,
        /// Total: entries refused for a full address group.
        REFUSED_ADDRESS_FULL,
        /// Total: requests bypass links passed.
        BYPASSED,
        /// Total: visitors revoked.
        REVOKED,
        /// The run-time settings' version (0: none).
        SETTINGS_VERSION,
        /// Visitors passed over at the head this tick, asleep within their
        /// sleep grace: each now holds a claim.
        CLAIMED,
        /// Claims held after the tick.
        CLAIMS,
        /// A kept stock's units left (-1: no stock kept).
        STOCK_LEFT,
        /// A kept stock's units sold.
        STOCK_SOLD,
        /// The overbooking margin in force, per mille.
        STOCK_MARGIN,
    }
);

record!(
    /// The prelude's `waiting_reply`: a visitor in line.
    waiting_reply, "WR" {
        /// [`ReplyKind::Waiting`](crate::reply::ReplyKind::Waiting).
        KIND,
        /// 1-based position.
        POSITION,
        /// The queue state ('' unknown).
        STATE,
        /// The measured admission rate ('' none).
        MEASURED_RATE,
        /// The configured rate ('' none).
        ADMIT_RATE,
        /// The shortest poll interval ('' none).
        POLL_MIN_MS,
        /// The longest poll interval ('' none).
        POLL_MAX_MS,
        /// The visitor's ticket (signed into its place cookie).
        TICKET,
        /// A kept stock's units left ('' no stock kept; 0 sold out: the
        /// visitor keeps its place and is told so).
        STOCK_LEFT,
    }
);

record!(
    /// The prelude's `pre_queue_reply`: a visitor before the draw placed
    /// it (no position exists yet).
    pre_queue_reply, "PR" {
        /// [`ReplyKind::PreQueue`](crate::reply::ReplyKind::PreQueue).
        KIND,
        /// The opening, epoch ms ('' once cleared).
        OPENS_AT,
        /// Redis' clock.
        NOW,
        /// The shortest poll interval ('' none).
        POLL_MIN_MS,
        /// The longest poll interval ('' none).
        POLL_MAX_MS,
        /// The opening's spread window ('' none).
        OPENING_SPREAD_MS,
        /// The abandon timeout ('' none).
        ABANDON_AFTER_MS,
        /// The visitor's draw slot, its score ('' a drawn visitor already
        /// on its ticket while the draw runs).
        SLOT,
        /// The number of the draw the slot belongs to ('' as the slot).
        DRAW_NUMBER,
        /// A kept stock's units left, as in the waiting reply.
        STOCK_LEFT,
    }
);

record!(
    /// A reply for a visitor holding an entry token.
    admitted_reply, "AD" {
        /// [`ReplyKind::Admitted`](crate::reply::ReplyKind::Admitted).
        KIND,
        /// The entry token.
        TOKEN,
        /// Epoch ms from which it is accepted.
        ACTIVATE_AT,
        /// Epoch ms at which it lapses.
        EXPIRES_AT,
    }
);

record!(
    /// The challenge script's reply: a new challenge's terms.
    challenge_reply, "CR" {
        /// The queue's `challenge_max_number` (level 0's difficulty).
        MAX_NUMBER,
        /// The challenge's lifetime.
        TTL_MS,
        /// The difficulty level in force (the prelude's `challenge_level`).
        LEVEL,
    }
);

record!(
    /// `session:<uid>`: `activateAt|endsAt|capAt|touched`: an admitted
    /// visitor's session (README, *Browse and spend routes*).
    session_record, "SN" {
        /// Epoch ms from which browse routes pass (the token's activateAt).
        ACTIVATE_AT,
        /// Epoch ms at which it ends (the key expires then too).
        ENDS_AT,
        /// Epoch ms past which renewal never moves `ENDS_AT`.
        CAP_AT,
        /// `1` once the visitor came (a browse request): token and slot
        /// then last until `ENDS_AT`; `0` before.
        TOUCHED,
    }
);

/// The position of the tag in every tagged reply
/// ([`ReplyKind`](crate::reply::ReplyKind)): the Lua `REPLY_KIND`.
pub const KIND: usize = 1;

/// A `token:<uid>` record read by its declared positions
/// ([`token_record`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRecord {
    /// The entry token (a secret: never log it).
    pub token: String,
    /// Epoch ms from which it is accepted.
    pub activate_at: u64,
    /// Epoch ms at which it lapses.
    pub expires_at: u64,
    /// How often it was given back after an origin failure.
    pub restores: u64,
}

impl TokenRecord {
    /// Reads a record as the scripts write it; `None` when malformed.
    pub fn parse(record: &str) -> Option<TokenRecord> {
        let f: Vec<&str> = record.split(SEPARATOR).collect();
        if f.len() != token_record::LEN {
            return None;
        }
        let num = |p: usize| f[at(p)].parse::<u64>().ok();
        Some(TokenRecord {
            token: f[at(token_record::TOKEN)].to_string(),
            activate_at: num(token_record::ACTIVATE_AT)?,
            expires_at: num(token_record::EXPIRES_AT)?,
            restores: num(token_record::RESTORES)?,
        })
    }
}

/// The kind and time of a `status:<uid>` record, read by its declared
/// positions ([`status_record`]); `None` when malformed.
pub fn status_kind_at(record: &str) -> Option<(&str, u64)> {
    let f: Vec<&str> = record.split(SEPARATOR).collect();
    let kind = f.get(at(status_record::KIND))?;
    let when = f.get(at(status_record::AT))?.parse().ok()?;
    Some((kind, when))
}

/// The 0-based index of a 1-based record position, for Rust's decoders.
pub(crate) const fn at(position: usize) -> usize {
    position - 1
}

/// A record's fields: (name, 1-based position).
pub(crate) type Positions = &'static [(&'static str, usize)];

/// Every record the scripts see as a Lua table of positions (`WR.TICKET`):
/// (table, fields with their positions, length as field `LEN`). A table
/// is one Lua local whatever its size, which keeps the biggest scripts
/// within Lua's 200 locals.
pub(crate) fn tables() -> [(&'static str, Positions, usize); 7] {
    [
        (admit_arg::LUA, admit_arg::FIELDS, admit_arg::LEN),
        (admit_reply::LUA, admit_reply::FIELDS, admit_reply::LEN),
        (
            waiting_reply::LUA,
            waiting_reply::FIELDS,
            waiting_reply::LEN,
        ),
        (
            pre_queue_reply::LUA,
            pre_queue_reply::FIELDS,
            pre_queue_reply::LEN,
        ),
        (
            admitted_reply::LUA,
            admitted_reply::FIELDS,
            admitted_reply::LEN,
        ),
        (
            challenge_reply::LUA,
            challenge_reply::FIELDS,
            challenge_reply::LEN,
        ),
        (
            session_record::LUA,
            session_record::FIELDS,
            session_record::LEN,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{status_record, token_record};

    /// Positions follow the declaration from 1 with no gap, so a record
    /// built in Lua by position has no hole and its length is `LEN`.
    #[test]
    fn positions_count_from_one_in_declaration_order() {
        let records = tables()
            .into_iter()
            .map(|(_, fields, _)| fields)
            .chain([token_record::ALL, status_record::ALL]);
        for record in records {
            let positions: Vec<usize> = record.iter().map(|(_, p)| *p).collect();
            let expected: Vec<usize> = (1..=record.len()).collect();
            assert_eq!(positions, expected, "{record:?}");
        }
        assert_eq!(admit_arg::GRANTS, admit_arg::LEN);
        for kind in [
            waiting_reply::KIND,
            pre_queue_reply::KIND,
            admitted_reply::KIND,
        ] {
            assert_eq!(kind, KIND);
        }
        assert_eq!(token_record::RESTORES, 4);
        assert_eq!(status_record::TOKEN, 3);
    }

    /// An `IN_FLIGHT` status record carries the token record after its
    /// time: the scripts write `kind|at` and then the token record.
    #[test]
    fn a_status_record_carries_the_token_record_after_its_time() {
        let tail: Vec<usize> = [
            status_record::TOKEN,
            status_record::ACTIVATE_AT,
            status_record::EXPIRES_AT,
            status_record::RESTORES,
        ]
        .map(|p| p - status_record::AT)
        .to_vec();
        let token: Vec<usize> = token_record::ALL.iter().map(|(_, p)| *p).collect();
        assert_eq!(tail, token);
        assert_eq!(status_record::LEN, status_record::AT + token_record::LEN);
    }

    #[test]
    fn records_parse_by_their_positions() {
        let t = TokenRecord::parse("abc|10|20|1").unwrap();
        assert_eq!(
            (t.token.as_str(), t.activate_at, t.expires_at, t.restores),
            ("abc", 10, 20, 1)
        );
        assert_eq!(TokenRecord::parse("abc|10|20"), None);
        assert_eq!(TokenRecord::parse("abc|x|20|0"), None);
        assert_eq!(status_kind_at("ISSUED|17"), Some(("ISSUED", 17)));
        assert_eq!(
            status_kind_at("IN_FLIGHT|5|abc|1|2|0"),
            Some(("IN_FLIGHT", 5))
        );
        assert_eq!(status_kind_at("ISSUED"), None);
    }

    #[test]
    fn the_config_read_is_config_fields_once_each() {
        let mut fields = CONFIG_READ.to_vec();
        fields.sort_unstable();
        fields.dedup();
        assert_eq!(fields.len(), CONFIG_READ.len());
        for field in CONFIG_READ {
            assert!(config::ALL.iter().any(|(_, f)| *f == field), "{field}");
        }
    }
}
