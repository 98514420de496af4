//! The key schema: every key of a queue under one hash tag `{queue}`, so each
//! script touches a single cluster slot; ids are validated before they can
//! become part of a key.

use std::fmt;

/// Key prefix used when none is configured.
pub const DEFAULT_PREFIX: &str = "qg";

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Empty or longer than allowed.
    #[error("{what} must be 1 to {max} characters long")]
    Length { what: &'static str, max: usize },
    /// A character outside the allowed set.
    #[error("{what} may only contain {allowed}")]
    Charset {
        what: &'static str,
        allowed: &'static str,
    },
}

fn check(
    value: &str,
    what: &'static str,
    max: usize,
    allowed: &'static str,
    ok: impl Fn(u8) -> bool,
) -> Result<(), IdError> {
    if value.is_empty() || value.len() > max {
        return Err(IdError::Length { what, max });
    }
    if !value.bytes().all(ok) {
        return Err(IdError::Charset { what, allowed });
    }
    Ok(())
}

/// A queue id: `[a-z0-9_-]{1,32}`. It is the hash tag of every key.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueId(String);

impl QueueId {
    /// Longest accepted queue id.
    pub const MAX_LEN: usize = 32;

    /// Validates a queue id.
    pub fn new(id: &str) -> Result<Self, IdError> {
        check(
            id,
            "queue id",
            Self::MAX_LEN,
            "lowercase letters, digits, '-' and '_'",
            |b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_',
        )?;
        Ok(QueueId(id.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A user id: 1 to 64 printable ASCII characters without braces (a brace
/// could change the key's hash tag). Visitor ids minted by the worker and JWT
/// `sub` claims of common identity providers (`auth0|123`, emails) fit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserId(String);

impl UserId {
    /// Longest accepted user id.
    pub const MAX_LEN: usize = 64;

    /// Validates a user id.
    pub fn new(id: &str) -> Result<Self, IdError> {
        check(
            id,
            "user id",
            Self::MAX_LEN,
            "printable ASCII without spaces or braces",
            |b| b.is_ascii_graphic() && b != b'{' && b != b'}',
        )?;
        Ok(UserId(id.to_string()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for UserId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A validated key prefix: `[A-Za-z0-9_:-]{1,32}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefix(String);

impl Prefix {
    /// Validates a key prefix.
    pub fn new(prefix: &str) -> Result<Self, IdError> {
        check(
            prefix,
            "key prefix",
            32,
            "letters, digits, ':', '-' and '_'",
            |b| b.is_ascii_alphanumeric() || b == b':' || b == b'-' || b == b'_',
        )?;
        Ok(Prefix(prefix.to_string()))
    }
}

impl Default for Prefix {
    fn default() -> Self {
        Prefix(DEFAULT_PREFIX.to_string())
    }
}

/// The keys of one queue: `<prefix>:{<queue>}:<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueKeys {
    queue: QueueId,
    /// `<prefix>:{<queue>}:`, the part every key starts with. Scripts that
    /// derive per-user keys for users they pop get it as an argument.
    base: String,
}

impl QueueKeys {
    /// Keys of `queue` under `prefix`.
    pub fn new(prefix: &Prefix, queue: &QueueId) -> Self {
        QueueKeys {
            queue: queue.clone(),
            base: [prefix.0.as_str(), ":{", queue.0.as_str(), "}:"].concat(),
        }
    }

    /// The queue these keys belong to.
    pub fn queue(&self) -> &QueueId {
        &self.queue
    }

    /// `<prefix>:{<queue>}:`.
    pub fn base(&self) -> &str {
        &self.base
    }

    // Concatenated, not `format!`: the edge builds keys on every poll, and
    // the formatting machinery costs more than the copy.
    fn key(&self, name: &str) -> String {
        [self.base.as_str(), name].concat()
    }

    /// ZSET user → ticket: the FIFO line.
    pub fn waiting(&self) -> String {
        self.key(name::WAITING)
    }
    /// STRING: the ticket counter.
    pub fn seq(&self) -> String {
        self.key(name::SEQ)
    }
    /// ZSET user → slot expiry (ms): occupied order slots.
    pub fn active(&self) -> String {
        self.key(name::ACTIVE)
    }
    /// STRING: the scheduler lease owner.
    pub fn lock(&self) -> String {
        self.key(name::LOCK)
    }
    /// HASH: effective settings and the operator's queue state.
    pub fn config(&self) -> String {
        self.key(name::CONFIG)
    }
    /// HASH: counters and the admission-rate estimate.
    pub fn stats(&self) -> String {
        self.key(name::STATS)
    }
    /// STRING: a user's entry token record.
    pub fn token(&self, user: &UserId) -> String {
        [self.base.as_str(), name::TOKEN, user.0.as_str()].concat()
    }
    /// STRING: a user's status record.
    pub fn status(&self, user: &UserId) -> String {
        [self.base.as_str(), name::STATUS, user.0.as_str()].concat()
    }
    /// STRING: a user's session record (see
    /// [`session_record`](crate::records::session_record)).
    pub fn session(&self, user: &UserId) -> String {
        [self.base.as_str(), name::SESSION, user.0.as_str()].concat()
    }
    /// LIST: a user's last status changes (`KIND|at`, oldest first, at
    /// most [`crate::fields::HISTORY_KEEP`]), kept as long as the status
    /// record; never a token.
    pub fn history(&self, user: &UserId) -> String {
        [self.base.as_str(), name::HISTORY, user.0.as_str()].concat()
    }
    /// STRING: marks (for one origin bucket) that a settle of this user
    /// was counted in the origin's answers: one sample a second per user.
    pub fn sampled(&self, user: &UserId) -> String {
        [self.base.as_str(), name::SAMPLED, user.0.as_str()].concat()
    }
    /// HASH: the entry guard's state: client address → its budget
    /// (`tokens|at`), and `pow:<challenge>` → a used solution's expiry (ms).
    pub fn guard(&self) -> String {
        self.key(name::GUARD)
    }

    /// ZSET user → ticket: the claims of visitors passed over at the head
    /// while asleep, within their sleep grace (docs/engine.md, *Sleep
    /// grace*).
    pub fn claims(&self) -> String {
        self.key(name::CLAIMS)
    }

    /// ZSET user → pre-ticket: the pre-queue before a scheduled opening
    /// (no order: places are drawn at the opening).
    pub fn pre(&self) -> String {
        self.key(name::PRE)
    }
    /// ZSET user → pre-ticket: the pre-queue sealed at its opening while
    /// the scheduler places it in a random order.
    pub fn draw(&self) -> String {
        self.key(name::DRAW)
    }

    /// HASH: address group → `round|score|uid` (its last draw round in
    /// the open pre-queue, and its identity while it has only one), for
    /// IPv6 the distinct /64s seen per /56 and /48 (what ranks a visitor
    /// in the draw's rounds), and `#<round>` → the visitors of that round;
    /// removed when the pre-queue is sealed (lua/prelude.lua draw_slot).
    pub fn groups(&self) -> String {
        self.key(name::GROUPS)
    }

    /// HASH: the identities of the open pre-queue whose address group has
    /// more than one (uid → `score|group`): after the seal the lease
    /// holder deals each such group's seats among them at random.
    pub fn members(&self) -> String {
        self.key(name::MEMBERS)
    }

    /// HASH: `members` of the sealed pre-queue, until its seats are
    /// dealt (then removed).
    pub fn draw_members(&self) -> String {
        self.key(name::DRAW_MEMBERS)
    }

    /// STRING: the open pre-queue's round-1 seats whose address group has
    /// more than one identity (`i,` each, 0-based indices), which the deal
    /// may give to another; renamed `draw_moved` at the seal.
    pub fn moved(&self) -> String {
        self.key(name::MOVED)
    }

    /// STRING: `moved` of the last sealed draw, its number appended
    /// (`#n`; just that when none is listed), kept until the next seal:
    /// the edge reads it once per draw (crate::draw::MovedSeats).
    pub fn draw_moved(&self) -> String {
        self.key(name::DRAW_MOVED)
    }

    /// HASH: the commitment of the next draw (docs/drop-day.md, *A draw
    /// anyone can verify*): its secret seed and salt key, `SHA-256(seed)`
    /// and when it was published; after the reveal, the draw it went to.
    /// The edge reads only its public fields.
    pub fn draw_commit(&self) -> String {
        self.key(name::DRAW_COMMIT)
    }

    /// HASH: draw `n`'s record: `header` (the public JSON), `top` (the
    /// pages' roots), `p<k>` (page k's leaves), `salt_key` (never served:
    /// the edge makes receipts with it). Written once, never changed.
    pub fn draw_record(&self, n: u64) -> String {
        format!("{}{}{n}", self.base, name::DRAW_RECORD)
    }

    /// SET: the users holding a live place taken from address group
    /// `group` (kept only while `entry_places_per_address` is on).
    pub fn places(&self, group: &crate::guard::ClientAddress) -> String {
        format!("{}{}{}", self.base, name::PLACES, group.as_str())
    }

    /// HASH: the queue's bypass links for staff (id → `sha|expiresAt|
    /// revoked|uses|lastUsedAt|createdAt|name`; see [`crate::bypass`]).
    pub fn bypass(&self) -> String {
        self.key(name::BYPASS)
    }

    /// HASH: the queue's run-time settings (setting → its JSON value),
    /// set through the admin API or the CLI; they win over the config
    /// file's (docs/scheduler.md, *Settings at run time*).
    pub fn settings(&self) -> String {
        self.key(name::SETTINGS)
    }

    /// LIST: wakes an idle lease holder (at most one item; see
    /// [`crate::settings::IDLE_WAIT_MS`]).
    pub fn wake(&self) -> String {
        self.key(name::WAKE)
    }

    /// Units of the stock held by orders in flight: user → units, one
    /// entry per consumed token until its settle (docs/drop-day.md,
    /// *Stock*).
    pub fn stock_held(&self) -> String {
        self.key(name::STOCK_HELD)
    }

    /// HASH: the origin's answers recorded by settles in Redis second
    /// `second` (see [`fields::origin`](crate::fields::origin)).
    pub fn origin(&self, second: u64) -> String {
        format!("{}{}{second}", self.base, name::ORIGIN)
    }
}

names!(
    /// The key names after `<prefix>:{<queue>}:`. Scripts that derive
    /// per-user keys (and the seen bitmaps) get them as Lua locals.
    name, "K_" {
        /// ZSET: the line.
        WAITING = "waiting",
        /// STRING: the ticket counter.
        SEQ = "seq",
        /// ZSET: occupied slots.
        ACTIVE = "active",
        /// STRING: the lease.
        LOCK = "lock",
        /// HASH: settings and state.
        CONFIG = "config",
        /// HASH: counters.
        STATS = "stats",
        /// Prefix of a user's token record key.
        TOKEN = "token:",
        /// Prefix of a user's status record key.
        STATUS = "status:",
        /// Prefix of a user's session record (see `session`).
        SESSION = "session:",
        /// Prefix of a user's status history (see `history`).
        HISTORY = "history:",
        /// Prefix of a user's origin sample mark (see `sampled`).
        SAMPLED = "sampled:",
        /// Prefix of the seen bitmaps, `seen:<bucket>:<block>`.
        SEEN = "seen:",
        /// Prefix of the sleep-grace bitmaps, `grace:<bucket>:<block>`.
        GRACE = "grace:",
        /// ZSET: claims of visitors passed over while asleep.
        CLAIMS = "claims",
        /// HASH: entry budgets by address and used solutions.
        GUARD = "guard",
        /// ZSET: the pre-queue.
        PRE = "pre",
        /// ZSET: the sealed pre-queue being drawn.
        DRAW = "draw",
        /// HASH: pre-queued identities per address group.
        GROUPS = "groups",
        /// HASH: pre-queued identities of groups with more than one.
        MEMBERS = "members",
        /// HASH: `members` of the sealed pre-queue.
        DRAW_MEMBERS = "draw_members",
        /// STRING: round-1 seats the deal may move.
        MOVED = "moved",
        /// STRING: `moved` of the last sealed draw.
        DRAW_MOVED = "draw_moved",
        /// HASH: the next draw's secret seed and its commitment.
        DRAW_COMMIT = "draw_commit",
        /// Prefix of a sealed draw's public record, `draw_record:<n>`.
        DRAW_RECORD = "draw_record:",
        /// Prefix of an address group's live places, `places:<group>`.
        PLACES = "places:",
        /// Prefix of the origin's answers per second, `origin:<second>`
        /// (a HASH of counts by class and latency bucket; expires itself).
        ORIGIN = "origin:",
        /// HASH: bypass links, id → record.
        BYPASS = "bypass",
        /// HASH: run-time settings, name → JSON value (they win over the
        /// config file's).
        SETTINGS = "settings",
        /// LIST: at most one item, pushed when the line or the pre-queue
        /// gets its first visitor or the settings change: an idle lease
        /// holder waits on it (BLPOP) instead of ticking.
        WAKE = "wake",
        STOCK_HELD = "stock_held",
    }
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main").unwrap());
        let user = UserId::new("u-1").unwrap();
        for k in [
            keys.waiting(),
            keys.seq(),
            keys.active(),
            keys.lock(),
            keys.config(),
            keys.stats(),
            keys.token(&user),
            keys.history(&user),
            keys.settings(),
            keys.wake(),
            keys.claims(),
            keys.status(&user),
            keys.sampled(&user),
        ] {
            assert!(k.starts_with("qg:{main}:"), "{k}");
        }
        assert_eq!(keys.token(&user), "qg:{main}:token:u-1");
    }

    #[test]
    fn queue_ids_are_validated() {
        assert!(QueueId::new("drop-2026_a").is_ok());
        for bad in ["", "Main", "a b", "a{b", "x".repeat(33).as_str(), "é"] {
            assert!(QueueId::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn user_ids_cannot_break_a_key() {
        assert!(UserId::new("auth0|5f1c").is_ok());
        assert!(UserId::new("ann@example.com").is_ok());
        for bad in ["", "a b", "a{x}", "tab\t", "é", "x".repeat(65).as_str()] {
            assert!(UserId::new(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            UserId::new("").unwrap_err(),
            IdError::Length {
                what: "user id",
                max: 64
            }
        );
    }

    #[test]
    fn prefixes_are_validated() {
        assert!(Prefix::new("shop:qg").is_ok());
        assert!(Prefix::new("a{b").is_err());
        assert!(Prefix::new("").is_err());
    }
}
