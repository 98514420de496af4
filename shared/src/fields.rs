//! The data inside a queue's keys: config-hash and stats-hash field names,
//! status kinds and the token/status record layouts. Declared once here;
//! each Lua script gets the names it uses as locals from [`lua_header`].

use crate::records;
use crate::reply::ReplyKind;
use crate::settings::QueueState;

mod lua;

pub use lua::{lua_header, lua_names, lua_table_fields};

names!(
    /// Fields of the `config` hash. The settings' own fields are the serde
    /// names of [`Settings`](crate::Settings); the ones read by name (in
    /// Lua or by the operator's `status`) are listed here, and a test checks
    /// they are settings.
    config, "CF_" {
        /// The operator's [`QueueState`]; never overwritten by `configure`.
        STATE = "state",
        /// The scheduler's measured admissions per second, for the ETA.
        MEASURED_RATE = "measured_rate",
        /// Setting: order slots.
        MAX_ACTIVE = "max_active",
        /// Setting: longest line.
        MAX_WAITING = "max_waiting",
        /// Setting: a waiting user silent this long is not admitted.
        ABANDON_AFTER_MS = "abandon_after_ms",
        /// Setting: a near user silent this long has left (below
        /// `abandon_after_ms`: no grace).
        SLEEP_GRACE_MS = "sleep_grace_ms",
        /// Setting: the configured rate (ETA before a measurement exists).
        ADMIT_RATE_PER_SECOND = "admit_rate_per_second",
        /// Setting: shortest poll interval.
        POLL_MIN_MS = "poll_min_ms",
        /// Setting: longest poll interval.
        POLL_MAX_MS = "poll_max_ms",
        /// Setting: how long a consumed token holds its slot.
        IN_FLIGHT_MS = "in_flight_ms",
        /// Setting: how long a status record lives.
        STATUS_TTL_MS = "status_ttl_ms",
        /// Setting: the retry window after an origin failure.
        RETRY_WINDOW_MS = "retry_window_ms",
        /// Setting: the per-address refill.
        ENTRY_BUDGET_PER_MINUTE = "entry_budget_per_minute",
        /// Setting: the per-address burst.
        ENTRY_BUDGET_BURST = "entry_budget_burst",
        /// Setting: the most live places per address group (0: no cap).
        ENTRY_PLACES_PER_ADDRESS = "entry_places_per_address",
        /// Setting: the proof-of-work difficulty.
        CHALLENGE_MAX_NUMBER = "challenge_max_number",
        /// Setting: a challenge's lifetime.
        CHALLENGE_TTL_MS = "challenge_ttl_ms",
        /// Setting: the line size the challenge's difficulty levels count
        /// from.
        CHALLENGE_CROWD = "challenge_crowd",
        /// Setting: whether origin control steers the rate.
        ORIGIN_CONTROL = "origin_control",
        /// Setting: the lowest rate origin control cuts to.
        MIN_ADMIT_RATE_PER_SECOND = "min_admit_rate_per_second",
        /// Origin control: the admissions per second now in force (between
        /// `min_admit_rate_per_second` and `admit_rate_per_second`); kept
        /// here so a new lease holder carries on from it.
        TARGET_RATE = "target_rate",
        /// Origin control: the Redis second of the last cut (0: none);
        /// only answers recorded after it count towards the next one.
        ORIGIN_CUT_AT = "origin_cut_at",
        /// Origin control: the share of 5xx and unanswered orders over the
        /// last window, as the edge saw them ('' without answers).
        ORIGIN_ERROR_SHARE = "origin_error_share",
        /// Origin control: the origin's p95 latency in ms over the last
        /// window ('' without answers).
        ORIGIN_P95_MS = "origin_p95_ms",
        /// The admissions per second in force (origin control's target, or
        /// the configured rate), recorded by each tick: idle passthrough
        /// refills the shared rate bucket at it.
        RATE_NOW = "rate_now",
        /// Setting: the scheduler tick (sizes the shared rate bucket).
        TICK_MS = "tick_ms",
        /// The near zone's last ticket (docs/uncapped-line.md): visitors
        /// at or before it must keep polling; it only moves forward. Part
        /// of the snapshot each tick writes for the edge.
        ZONE_FRONT = "zone_front",
        /// Snapshot: visitors at or before `zone_front`.
        ZONE_COUNT = "zone_count",
        /// Setting: the exact head's length in time.
        EXACT_HEAD_MS = "exact_head_ms",
        /// Snapshot: the exact head's last ticket (0: no head).
        HEAD_FRONT = "head_front",
        /// Snapshot: visitors at or before `head_front`.
        HEAD_COUNT = "head_count",
        /// Snapshot: the last ticket in line (0: none).
        TAIL = "tail",
        /// Snapshot: the line's length.
        WAITING = "waiting",
        /// Snapshot: Redis' clock (epoch ms) when the tick wrote it.
        SNAP_AT = "snap_at",
        /// Snapshot: the lease the tick that wrote it left its holder (ms:
        /// `lease_ttl_ms`, or the idle lease's): a snapshot older than
        /// this when read has no live writer (docs/uncapped-line.md).
        SNAP_TTL = "snap_ttl",
        /// Snapshot: marks of the far part's rank-to-ticket map,
        /// `rank:ticket,…` at ranks growing by a fifth from the zone's,
        /// rewritten once a second.
        MARKS = "marks",
        /// Snapshot: when the marks were written (epoch ms).
        MARKS_AT = "marks_at",
        /// Snapshot: visitors gone from ahead of the first mark since the
        /// marks were written, rewritten every tick: the edge subtracts it
        /// from every mark's rank.
        MARKS_SHIFT = "marks_shift",
        /// Setting: how long an entry token is valid.
        TOKEN_TTL_MS = "token_ttl_ms",
        /// Setting: admit at once while nobody waits.
        IDLE_PASSTHROUGH = "idle_passthrough",
        /// Setting: an admitted visitor's session.
        SESSION_MS = "session_ms",
        /// Setting: whether browsing renews the session.
        SESSION_RENEW = "session_renew",
        /// Setting: the window the pre-queue's first polls after the
        /// opening are spread over.
        OPENING_SPREAD_MS = "opening_spread_ms",
        /// Schedule: epoch ms of the opening; before it new places go to
        /// the pre-queue (absent: no scheduled opening).
        OPENS_AT = "opens_at",
        /// Schedule: epoch ms after which no new places are taken.
        CLOSES_AT = "closes_at",
        /// Draw: the last ticket before the range reserved for the
        /// pre-queue at the opening.
        DRAW_BASE = "draw_base",
        /// Run-time settings: the version of the `settings` hash (one more
        /// for every change an operator makes through the admin API or
        /// the CLI); the lease holder applies it at its next tick.
        SETTINGS_VERSION = "settings_version",
        /// Run-time settings: the version the lease holder last applied
        /// and published with the file's settings.
        SETTINGS_APPLIED = "settings_applied",
        /// Schedule: its version, one more for every write of the opening
        /// or the closing (an operator's `schedule`, or a holder
        /// publishing its file's): a file's schedule never goes over a
        /// newer one.
        SCHEDULE_VERSION = "schedule_version",
        /// Fail-over: the fingerprint of the config file whose settings
        /// (and schedule) are published, beside the lease: a standby whose
        /// file differs keeps them and says so.
        FILE_FINGERPRINT = "file_fingerprint",
        /// Fail-over: that file's settings (JSON), which a standby whose
        /// file differs enforces when it takes over.
        FILE_SETTINGS = "file_settings",
        /// Run-time settings: the version the lease holder refused and
        /// why, `version|reason` (absent: none refused).
        SETTINGS_REFUSED = "settings_refused",
        /// Draw: the last ticket of the reserved range.
        DRAW_END = "draw_end",
        /// Draw: pre-queued visitors not placed yet (0: no draw running).
        DRAW_LEFT = "draw_left",
        /// Draw: visitors placed so far, by rank in `draw` (the cursor).
        DRAW_DONE = "draw_done",
        /// Draw: the seed of the permutation, hex ('' until the lease
        /// holder sets it; never changed while the draw runs).
        DRAW_SEED = "draw_seed",
        /// Draw: the sizes of its rounds, in rank order, comma-separated:
        /// the visitors of `draw` are ranked by round (an address group's
        /// first pre-queued identity is in round 1, its second in round 2,
        /// …) and by arrival within a round; each round's places are drawn
        /// among its own visitors only. Set when the pre-queue is sealed
        /// (absent in a draw sealed before rounds existed: one round).
        /// Every round from 1 to the last is listed, an empty one as 0,
        /// so a round's number is its place in the list; '' for a
        /// pre-queue whose counts did not add up (one round).
        DRAW_ROUNDS = "draw_rounds",
        /// Draw: how many pre-queues were sealed, so the number of the
        /// last draw. A slot's place cookie names the number of its draw,
        /// so it never reads another (docs/uncapped-line.md).
        DRAW_NUMBER = "draw_number",
        /// The randomness beacon named with the scheduled opening (JSON
        /// `{"source":…,"round":N}`; `schedule --beacon`): copied into the
        /// next commitment, its value mixed into the draw's key.
        DRAW_BEACON = "draw_beacon",
        /// Draw: visitors in line ahead of the reserved range at sealing:
        /// a drawn place's position while the draw runs is behind them.
        DRAW_AHEAD = "draw_ahead",
        /// Draw: `pending` while the seats of its address groups with more
        /// than one identity are still to be dealt among them at random
        /// (`draw_members`, draw_shuffle.lua), then `dealt`; '' when there
        /// were none. The edge answers no slot of a draw that had any
        /// from its snapshot (docs/uncapped-line.md).
        DRAW_SHUFFLE = "draw_shuffle",
        /// The operator's notice to the line (`queuegate-scheduler
        /// notice`; absent: none), shown on the page and in every reply.
        NOTICE = "notice",
        /// The notice's texts per language besides its default (a JSON
        /// object `{"de": "…"}`, `crate::notice::encode_texts`; absent:
        /// none), each shown to visitors whose page is in its language.
        NOTICE_TEXTS = "notice_texts",
        /// Liveness: earlier `abandon_after_ms` values still honoured after
        /// a change, `window|until,…` (until: epoch ms); the `seen:`
        /// bitmaps of each are marked and read until then (docs/engine.md,
        /// *Changing the windows*). Written by `configure` only.
        SEEN_PREV = "seen_prev",
        /// Liveness: the same for the sleep grace in force (the `grace:`
        /// bitmaps).
        GRACE_PREV = "grace_prev",
        /// Stock (docs/drop-day.md, *Stock*): the units left for sale,
        /// not counting those held by orders in flight (absent: no stock
        /// is kept; 0: sold out).
        STOCK_LEFT = "stock_left",
        /// Stock: units sold since the stock was first set.
        STOCK_SOLD = "stock_sold",
        /// Stock: the operator's overbooking margin in percent ('':
        /// measured from the drop's own conversion).
        STOCK_OVERBOOK = "stock_overbook",
        /// Stock: the stats' `ordered|expired` when the stock was first
        /// set, so the conversion is this drop's own.
        STOCK_BASE = "stock_base",
        /// Stock, each tick: the overbooking margin in force, per mille.
        STOCK_MARGIN = "stock_margin",
        /// Stock, each tick: the measured conversion (orders per ended
        /// turn) per mille ('' before enough turns ended).
        STOCK_CONV = "stock_conv",
        /// Stock, each tick: mean units per order, per mille ('' before
        /// the first order).
        STOCK_PER_ORDER = "stock_per_order",
        /// Stock, each tick: turns out (tokens issued, not spent yet).
        STOCK_OUT = "stock_out",
    }
);

names!(
    /// Fields of the `stats` hash: counters, and the leaver-scan cursor.
    stats, "SF_" {
        /// Tickets taken.
        ENTERED = "entered",
        /// Tokens issued.
        ADMITTED = "admitted",
        /// Leavers dropped from the line.
        ABANDONED = "abandoned",
        /// Tokens that ran out unused (or failed with no retry left).
        EXPIRED = "expired",
        /// Orders the origin accepted.
        ORDERED = "ordered",
        /// Consumes whose origin never settled before the slot ran out.
        LAPSED = "lapsed",
        /// Tokens given back after an origin failure.
        RESTORED = "restored",
        /// Where the rolling leaver scan goes on (a ticket).
        SCAN_CURSOR = "scan_cursor",
        /// Where the rolling scan of claims goes on (a ticket).
        CLAIM_CURSOR = "claim_cursor",
        /// Where the rolling scan of address budgets goes on (HSCAN cursor).
        ADDR_CURSOR = "addr_cursor",
        /// New places (and idle passthroughs) refused: the address spent its
        /// budget.
        REFUSED_BUDGET = "refused_budget",
        /// New places refused: no proof-of-work solution.
        REFUSED_CHALLENGE = "refused_challenge",
        /// New places refused: a solution used before.
        REFUSED_REUSED = "refused_reused",
        /// New places refused: no valid Turnstile token.
        REFUSED_TURNSTILE = "refused_turnstile",
        /// New places refused: a solution of a lower difficulty level than
        /// the one in force (the line grew while it was solved).
        REFUSED_STALE = "refused_stale",
        /// New places refused: the address group holds
        /// `entry_places_per_address` live places already.
        REFUSED_ADDRESS_FULL = "refused_address_full",
        /// Where the rolling leaver scan of the pre-queue goes on.
        PRE_CURSOR = "pre_cursor",
        /// The admission rate bucket the ticks and idle passthrough share:
        /// `tokens|at`.
        RATE_BUCKET = "rate_bucket",
        /// Visitors admitted at once by idle passthrough (also counted in
        /// `admitted`).
        PASSED = "passed",
        /// Pre-queued visitors placed in the line by the draw.
        DRAWN = "drawn",
        /// Requests passed by a bypass link (staff, QA).
        BYPASSED = "bypassed",
        /// Visitors revoked by an operator.
        REVOKED = "revoked",
        /// Places a revocation ended: removed from the line, or a revoked
        /// pre-queued visitor the draw did not place.
        WITHDRAWN = "withdrawn",
    }
);

names!(
    /// Fields of an `origin:<second>` hash: what the edge's settles saw of
    /// the origin in that second, by class, and by latency bucket
    /// (`lat:<i>`, `i` = 1-based index into [`ORIGIN_LATENCY_EDGES_MS`],
    /// one past the end for slower answers).
    origin, "OF_" {
        /// 2xx/3xx.
        OK = "ok",
        /// 4xx: the visitor's mistake, not the origin's trouble.
        CLIENT_ERROR = "c4",
        /// 5xx.
        SERVER_ERROR = "c5",
        /// No answer (network error, timeout).
        NO_ANSWER = "none",
        /// Prefix of a latency bucket's field.
        LATENCY = "lat:",
    }
);

/// A pre-queued visitor's score in `pre` and `draw` is
/// `(round − 1) × DRAW_ROUND_SPAN + index`, its 1-based arrival index in
/// its round ([`crate::draw::DrawSlot`]): ranked by draw round first, by
/// arrival within it. Indices stay below 2^32 and rounds below 2^21, so
/// the score is exact in a double.
pub const DRAW_ROUND_SPAN: u64 = 1 << 32;

/// The last draw round: an address group's identities beyond it share it.
pub const DRAW_MAX_ROUND: u64 = 1 << 20;

/// How long an address group's `places:<group>` set outlives its last new
/// place (its members' places are checked at each new place, so a set
/// that outlives them only costs a little memory): longer than any line.
pub const PLACES_KEEP_MS: u64 = 6 * 3_600_000;

/// Upper bounds (ms, inclusive) of the origin latency buckets; a last,
/// open bucket holds slower answers.
pub const ORIGIN_LATENCY_EDGES_MS: [u64; 8] = [50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000];
/// Width of one `origin:<second>` bucket.
pub const ORIGIN_BUCKET_MS: u64 = 1_000;
/// How long an `origin:<second>` hash lives: the longest window
/// (`origin_window_ms` ≤ 60 s) plus a margin.
pub const ORIGIN_KEEP_MS: u64 = 65_000;

names!(
    /// Kinds of a `status:<uid>` record (its first field).
    status, "ST_" {
        /// A token was issued: `ISSUED|at`.
        ISSUED = "ISSUED",
        /// The token was consumed: `IN_FLIGHT|at|token|activateAt|expiresAt|restores`
        /// (the token record follows `at`).
        IN_FLIGHT = "IN_FLIGHT",
        /// The origin accepted the order: `ORDERED|at|token`.
        ORDERED = "ORDERED",
        /// The token ran out unused: `EXPIRED|at`.
        EXPIRED = "EXPIRED",
        /// The user stopped polling and was dropped: `ABANDONED|at`.
        ABANDONED = "ABANDONED",
        /// The visitor was asleep (silent past `abandon_after_ms`, within
        /// its sleep grace) when its turn came: passed over, it holds a
        /// claim (in `claims`): `CLAIMED|at`.
        CLAIMED = "CLAIMED",
        /// A claim was taken up: the visitor is back in line on its own
        /// ticket, ahead of everyone, and admitted next: `RETURNED|at`.
        RETURNED = "RETURNED",
        /// An operator revoked the visitor's place or token: `REVOKED|at`.
        /// It keeps them out of the queue until it expires.
        REVOKED = "REVOKED",
    }
);

names!(
    /// Fields of the `guard` hash besides client addresses.
    guard_field, "GF_" {
        /// Prefix of a used proof-of-work solution's field (then its
        /// challenge); the value is its expiry in ms.
        POW = "pow:",
        /// Prefix of an address group found at its cap of live places
        /// (then the group); the value is until when, in ms
        /// ([`ADDRESS_FULL_HOLD_MS`]).
        FULL = "full:",
    }
);

names!(
    /// Fields of the `groups` hash besides the address groups' counts.
    group_field, "GR_" {
        /// Prefix of a draw round's size (then the round, from 1): the
        /// visitors of the open pre-queue in that round. No address group
        /// starts with it.
        ROUND = "#",
    }
);

names!(
    /// Fields of the `draw_commit` hash (docs/drop-day.md, *A draw anyone
    /// can verify*) and of a `draw_record:<n>` hash.
    commit, "DC_" {
        /// `pending` from the commitment until the reveal, then `revealed`.
        STATE = "state",
        /// The secret seed, hex (never served before the reveal).
        SEED = "seed",
        /// The key of the registrants' salts, hex (never served).
        SALT_KEY = "salt_key",
        /// `SHA-256(seed)`, hex: public.
        COMMITMENT = "commitment",
        /// When the commitment was made (epoch ms): public.
        COMMITTED_AT = "committed_at",
        /// The draw it is for (the number its seal will get): public.
        DRAW = "draw",
        /// The opening it was made for (epoch ms): public.
        OPENS_AT = "opens_at",
        /// The beacon round named with it (JSON `{"source":…,"round":N}`;
        /// absent for none): public.
        BEACON = "beacon",
        /// Record: the public JSON of the draw.
        HEADER = "header",
        /// Record: the roots of the pages of leaves, hex, concatenated.
        TOP = "top",
        /// Record: prefix of page k's leaves (`p<k>`), hex, concatenated.
        PAGE = "p",
    }
);

/// `draw_commit`'s state from the commitment until the reveal.
pub const COMMIT_PENDING: &str = "pending";
/// `draw_commit`'s state after the reveal.
pub const COMMIT_REVEALED: &str = "revealed";

/// `draw_shuffle` while a draw's seats are still to be dealt.
pub const DRAW_SHUFFLE_PENDING: &str = "pending";
/// `draw_shuffle` once they are.
pub const DRAW_SHUFFLE_DEALT: &str = "dealt";

/// How long an address group (or a /56 or /48) found at its cap of live
/// places is refused without counting them again: one count a second at
/// most, however often its clients knock (`guard` field
/// `full:<group>` → until when).
pub const ADDRESS_FULL_HOLD_MS: u64 = 1_000;

/// Status changes a user's `history:<uid>` keeps (the newest). Written
/// as a literal in the prelude's `set_status` (a Lua local less in the
/// biggest script); a test checks they agree.
pub const HISTORY_KEEP: u64 = 16;

/// Stock: the ended turns (orders and expiries since the stock was first
/// set) after which the drop's conversion counts as measured: the margin
/// and the chance estimate use it from then on.
pub const STOCK_MEASURED_AFTER: u64 = 20;

/// Stock: the largest measured overbooking margin, per mille (twice the
/// units left in turns out at most).
pub const STOCK_MARGIN_MAX_PER_MILLE: u64 = 1_000;

/// Stock: the most units one order may take (`Queuegate-Units` beyond it
/// counts as this many).
pub const STOCK_MAX_UNITS_PER_ORDER: u64 = 1_000;

/// Separator of record fields.
pub const SEPARATOR: char = '|';

record!(
    /// `token:<uid>`: `token|activateAt|expiresAt|restores`.
    token_record, "TR_" {
        /// The entry token.
        TOKEN,
        /// Epoch ms from which it is accepted.
        ACTIVATE_AT,
        /// Epoch ms at which it lapses.
        EXPIRES_AT,
        /// How often it was given back after an origin failure.
        RESTORES,
    }
);

record!(
    /// `status:<uid>`: the kind, the epoch ms of the change, then per kind
    /// (an `IN_FLIGHT` record carries the consumed token record after `at`).
    status_record, "SR_" {
        /// One of [`status`].
        KIND,
        /// Epoch ms of the change.
        AT,
        /// `IN_FLIGHT` / `ORDERED`: the token.
        TOKEN,
        /// `IN_FLIGHT`: the token's activateAt.
        ACTIVATE_AT,
        /// `IN_FLIGHT`: the token's expiresAt.
        EXPIRES_AT,
        /// `IN_FLIGHT`: the token's restore count.
        RESTORES,
    }
);

/// The time of an `ISSUED|<ms>` status record, i.e. the admitting tick.
pub fn issued_at(status_record: &str) -> Option<u64> {
    crate::records::status_kind_at(status_record)
        .filter(|(kind, _)| *kind == status::ISSUED)
        .map(|(_, at)| at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Settings;

    #[test]
    fn config_fields_the_scripts_read_are_settings() {
        let settings = Settings::field_names();
        for (_, field) in config::ALL {
            let kept_by_the_scheduler = [
                config::STATE,
                config::MEASURED_RATE,
                config::RATE_NOW,
                config::OPENS_AT,
                config::CLOSES_AT,
                config::DRAW_BASE,
                config::DRAW_END,
                config::DRAW_LEFT,
                config::DRAW_DONE,
                config::DRAW_SEED,
                config::DRAW_ROUNDS,
                config::DRAW_NUMBER,
                config::DRAW_BEACON,
                config::DRAW_AHEAD,
                config::DRAW_SHUFFLE,
                config::SEEN_PREV,
                config::GRACE_PREV,
                config::TARGET_RATE,
                config::ORIGIN_CUT_AT,
                config::ORIGIN_ERROR_SHARE,
                config::ORIGIN_P95_MS,
                config::ZONE_FRONT,
                config::ZONE_COUNT,
                config::HEAD_FRONT,
                config::HEAD_COUNT,
                config::TAIL,
                config::WAITING,
                config::SNAP_AT,
                config::SNAP_TTL,
                config::MARKS,
                config::MARKS_AT,
                config::MARKS_SHIFT,
                config::NOTICE,
                config::NOTICE_TEXTS,
                config::SETTINGS_VERSION,
                config::SETTINGS_APPLIED,
                config::SCHEDULE_VERSION,
                config::FILE_FINGERPRINT,
                config::FILE_SETTINGS,
                config::SETTINGS_REFUSED,
                config::STOCK_LEFT,
                config::STOCK_SOLD,
                config::STOCK_OVERBOOK,
                config::STOCK_BASE,
                config::STOCK_MARGIN,
                config::STOCK_CONV,
                config::STOCK_PER_ORDER,
                config::STOCK_OUT,
            ];
            if kept_by_the_scheduler.contains(field) {
                assert!(!settings.iter().any(|s| s == field), "{field} is a setting");
                continue;
            }
            assert!(settings.iter().any(|s| s == field), "{field} is no setting");
        }
    }

    #[test]
    fn the_header_defines_each_name_once() {
        let names = lua_names();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert!(names.contains(&"CF_STATE".to_string()));
        assert!(names.contains(&"QS_DRAINING".to_string()));
        let all = lua_header(|_| true);
        assert_eq!(all.matches("\nlocal ").count(), names.len());
        assert!(all.contains("local TR_EXPIRES_AT = 3\n"));
        assert!(all.contains("local CF_STATE = 'state'\n"));
        assert!(all.contains("local ORIGIN_LATENCY_EDGES = {50, 100, 250,"));
    }

    #[test]
    fn the_header_declares_only_the_names_asked_for() {
        let header = lua_header(|name| ["SEP", "ST_ISSUED"].contains(&name));
        let locals: Vec<&str> = header.lines().skip(1).collect();
        assert_eq!(locals, ["local ST_ISSUED = 'ISSUED'", "local SEP = '|'"]);
    }

    #[test]
    fn issued_records_give_their_time() {
        assert_eq!(issued_at("ISSUED|1764669600123"), Some(1_764_669_600_123));
        assert_eq!(issued_at("EXPIRED|1"), None);
        assert_eq!(issued_at("ISSUED|x"), None);
        assert_eq!(issued_at(""), None);
    }
}
