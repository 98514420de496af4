//! Queue settings: one validated struct with the seed design's defaults,
//! stored in the queue's config hash (one field per setting) so the edge
//! scripts read what the scheduler enforces.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod validate;

pub use validate::SettingsError;

/// The effective settings of one queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    /// Scheduler tick.
    pub tick_ms: u64,
    /// Admissions per second (fractions carry from tick to tick).
    pub admit_rate_per_second: f64,
    /// Order slots the origin can have in use at once.
    pub max_active: u64,
    /// Longest line accepted (waiting, pre-queued and being drawn): a
    /// safety limit set by Redis memory, no longer a way to shape traffic,
    /// since far-back visitors cost Redis nothing per poll
    /// (docs/uncapped-line.md). The default, 10,000,000, needs about
    /// 1.4 GB of Redis memory (BENCHMARKS.md, *Queue engine*).
    pub max_waiting: u64,
    /// How long an issued entry token stays valid when its visitor does
    /// not come: their first request on a protected route (a page of the
    /// checkout or the order) makes token and slot last as long as the
    /// session.
    pub token_ttl_ms: u64,
    /// An admitted visitor's session: from admission (or an idle pass)
    /// browse routes pass any number of times for this long (at least
    /// `token_ttl_ms`, so a turn never outlasts its session), and the slot
    /// is held until the order settles or the session ends, whichever is
    /// first (README, *Browse and spend routes*). 1 to 30 minutes.
    pub session_ms: u64,
    /// Renews the session on activity: each browse request moves its end
    /// to now + `session_ms`, never past [`SESSION_CAP_MS`] after it
    /// opened (a visitor cannot hold a slot for ever by browsing).
    pub session_renew: bool,
    /// How long a user's status outlives its last change (> token TTL, so an
    /// unused token is still reported as expired).
    pub status_ttl_ms: u64,
    /// A new token activates at a random moment in `[0, jitter_ms]`, so a
    /// batch does not reach the origin in the same millisecond.
    pub activation_jitter_ms: u64,
    /// A waiting user who has not polled for this long is not admitted:
    /// at the head they are passed over (see `sleep_grace_ms`).
    pub abandon_after_ms: u64,
    /// Sleep grace: a near visitor silent this long has left and is
    /// dropped. Silent longer than `abandon_after_ms` but within this, they
    /// keep their place (a locked phone); when their turn comes meanwhile
    /// the line goes on past them and they hold a claim, admitted ahead of
    /// the line when they poll again within it (docs/engine.md, *Sleep
    /// grace*). At least `abandon_after_ms` is used (equal turns the grace
    /// off); at most 30 minutes.
    pub sleep_grace_ms: u64,
    /// How long a consumed token holds its slot while the origin answers.
    pub in_flight_ms: u64,
    /// After an origin failure the same token is valid again for this long.
    pub retry_window_ms: u64,
    /// Shortest and longest poll interval told to a waiting visitor.
    pub poll_min_ms: u64,
    /// See `poll_min_ms`.
    pub poll_max_ms: u64,
    /// Scheduler lease TTL; must outlast the worst tick.
    pub lease_ttl_ms: u64,
    /// Most expired slots one tick frees, and most users it pops from the
    /// head (admitted or found to have left).
    pub sweep_limit: u64,
    /// Waiting users a tick checks for having left, in the near zone (a
    /// rolling scan; 0 turns it off, leaving leavers to the head).
    pub leaver_scan_per_tick: u64,
    /// The near zone: the visitors due within this long at the rate in
    /// force (at least one). They must keep polling to keep their places;
    /// further back nobody is dropped for silence (docs/uncapped-line.md).
    /// At least `abandon_after_ms + 2 × poll_max_ms` is used (see
    /// [`Settings::near_zone_ms`]), so a visitor who left far back is
    /// dropped before it reaches the head.
    pub exact_zone_ms: u64,
    /// The exact head: the visitors due within this long (at least one)
    /// are always answered by Redis, so their positions and their notice
    /// of admission are exact. Behind it, the near zone's polls go to
    /// Redis only when the visitor's last Redis request is
    /// `abandon_after_ms / 2` old, or its next poll would be late
    /// ([`edge_may_answer`]: to prove it is alive); the edge answers
    /// the others from its snapshot (docs/uncapped-line.md). 0, or a head
    /// as long as the near zone (at most the zone is used): every near
    /// poll goes to Redis.
    pub exact_head_ms: u64,
    /// New places one client address may take per minute (its refill);
    /// 0 turns the per-address budget off. Raise it for big NATs.
    pub entry_budget_per_minute: u64,
    /// New places one address may take at once before the refill paces it.
    pub entry_budget_burst: u64,
    /// Most live places (pre-queued, being drawn or waiting) one address
    /// group may hold at once; 0 (the default) turns the cap off. It counts
    /// the places taken while it is on: set it before the pre-queue opens.
    /// For drops whose visitors are not behind shared NATs (a campus, a
    /// phone carrier's CGNAT would be refused): docs/drop-day.md.
    pub entry_places_per_address: u64,
    /// Proof-of-work difficulty: the ALTCHA `maxnumber` (a solver tries
    /// half of it on average); doubled as the line fills up.
    pub challenge_max_number: u64,
    /// The line size the difficulty counts from: doubled from half of it,
    /// doubled again from three quarters. The default, 52,500, is the old
    /// line cap (5 min at 175/s), so a crowd pays what it paid when that
    /// cap was the limit.
    pub challenge_crowd: u64,
    /// How long a challenge may be solved and used (at most 2 min: a
    /// solution is a stock of places taken at once, and a short life keeps
    /// that stock from being gathered in advance).
    pub challenge_ttl_ms: u64,
    /// Origin control: admit at `admit_rate_per_second` only while the
    /// origin copes; cut the rate when orders fail or slow down, and raise
    /// it back while they do not. False: always the fixed rate.
    pub origin_control: bool,
    /// Origin control: the lowest rate a cut goes to (at most
    /// `admit_rate_per_second`).
    pub min_admit_rate_per_second: f64,
    /// Origin control: the answers looked at (the last this many ms, and
    /// only those after the last cut).
    pub origin_window_ms: u64,
    /// Origin control: answers needed in the window before a cut.
    pub origin_min_samples: u64,
    /// Origin control: cut when more than this share of the answers are
    /// 5xx or missing (4xx do not count: they are the visitor's).
    pub origin_max_error_share: f64,
    /// Origin control: cut when the origin's p95 latency exceeds this.
    pub origin_p95_target_ms: u64,
    /// Origin control: a cut multiplies the rate by this.
    pub origin_decrease_factor: f64,
    /// Origin control: while healthy the rate climbs from the minimum to
    /// the maximum in this long (a fixed step per second).
    pub origin_recover_ms: u64,
    /// While nobody waits (and no pre-queue), a slot is free and the rate
    /// allows: admit an entering visitor at once, and let a protected
    /// request without a token through (docs/drop-day.md).
    pub idle_passthrough: bool,
    /// After a scheduled opening the pre-queue's first polls are spread
    /// over this window, so they do not all land on the same millisecond
    /// (at most `abandon_after_ms / 2 − poll_min_ms` is used, so nobody who
    /// obeys retryAfter is taken for a leaver).
    pub opening_spread_ms: u64,
    /// Pre-queued visitors one draw call places (each call is one short
    /// script; the scheduler runs as many as the draw needs). Placing one
    /// costs Redis ~8 µs of CPU, so the default 250 keeps a call near 2 ms
    /// (3 ms at worst) at 100,000 pre-queued; 500 took 4–5.5 ms, at the
    /// 5 ms target (BENCHMARKS.md, "Drop day").
    pub draw_batch: u64,
}

/// The highest `entry_places_per_address`: a new place checks each place
/// its address holds (up to three lookups each), and a refused one writes
/// only a counter, so one client may repeat it: the cap bounds that work
/// (50 places: ~150 lookups, about the cost of the enter script itself).
pub const MAX_PLACES_PER_ADDRESS: u64 = 50;

/// The shortest and longest `session_ms`: a minute and half an hour.
pub const SESSION_MS_RANGE: std::ops::RangeInclusive<u64> = 60_000..=1_800_000;

/// However often a session is renewed, it ends this long after it opened.
pub const SESSION_CAP_MS: u64 = 1_800_000;

/// The longest sleep grace (`sleep_grace_ms`): 30 minutes. A claim is a
/// place held for someone who is not there; longer, a line's claims and
/// its grace bitmaps (kept 1.5 × the grace) would outgrow their use.
pub const MAX_SLEEP_GRACE_MS: u64 = 1_800_000;

/// The longest near zone (`exact_zone_ms`): a day.
pub const MAX_EXACT_ZONE_MS: u64 = 86_400_000;

impl Default for Settings {
    fn default() -> Self {
        Settings {
            tick_ms: 100,
            admit_rate_per_second: 175.0,
            max_active: 1_000,
            max_waiting: 10_000_000,
            token_ttl_ms: 300_000,
            session_ms: 600_000,
            session_renew: false,
            status_ttl_ms: 420_000,
            activation_jitter_ms: 2_000,
            abandon_after_ms: 90_000,
            sleep_grace_ms: 300_000,
            in_flight_ms: 30_000,
            retry_window_ms: 60_000,
            poll_min_ms: 1_000,
            poll_max_ms: 30_000,
            lease_ttl_ms: 2_000,
            sweep_limit: 1_000,
            leaver_scan_per_tick: 100,
            exact_zone_ms: 180_000,
            exact_head_ms: 5_000,
            entry_budget_per_minute: 40,
            entry_budget_burst: 40,
            entry_places_per_address: 0,
            challenge_max_number: 100_000,
            challenge_crowd: 52_500,
            challenge_ttl_ms: 120_000,
            origin_control: true,
            min_admit_rate_per_second: 1.0,
            origin_window_ms: 10_000,
            origin_min_samples: 20,
            origin_max_error_share: 0.1,
            origin_p95_target_ms: 2_000,
            origin_decrease_factor: 0.5,
            origin_recover_ms: 20_000,
            idle_passthrough: true,
            opening_spread_ms: 10_000,
            draw_batch: 250,
        }
    }
}

/// [`Settings::liveness_ms`] for an `abandon_after_ms`: half of it (the
/// edge reads it from a snapshot, not from settings).
pub fn liveness_ms(abandon_after_ms: u64) -> u64 {
    abandon_after_ms / 2
}

/// Whether a near poll `since_ms` after the visitor's last Redis request
/// (timed from before that request left the edge) may be answered at the
/// edge with `retry_after_ms` to its next poll: only while that request is
/// less than [`liveness_ms`] old *and* the next poll, told to come
/// `retry_after_ms` from now, is still due within three quarters of
/// `abandon_after_ms` of it. The last quarter is the margin a late poll
/// and a slow request to Redis have before the mark runs out (the bitmaps
/// find a poll at least `abandon_after_ms` after it); without it, a
/// `poll_max_ms` of half `abandon_after_ms` left none.
pub fn edge_may_answer(abandon_after_ms: u64, since_ms: u64, retry_after_ms: u64) -> bool {
    since_ms < liveness_ms(abandon_after_ms)
        && since_ms.saturating_add(retry_after_ms) <= abandon_after_ms - abandon_after_ms / 4
}

/// While a queue is idle (nobody waiting or pre-queued, no slot in use, no
/// draw) its lease holder ticks only when woken (a visitor joins the line,
/// an operator changes the settings) or after this long: an idle room
/// costs Redis a blocking wait and an admit per this period instead of ten
/// admits a second (docs/scheduler.md, *An idle room*).
pub const IDLE_WAIT_MS: u64 = 4_000;

impl Settings {
    /// The lease TTL an idle holder renews with: its lease must outlast a
    /// whole idle wait and the admit after it.
    pub fn idle_lease_ttl_ms(&self) -> u64 {
        self.lease_ttl_ms + IDLE_WAIT_MS + 1_000
    }

    /// The near zone's length in time: `exact_zone_ms`, but at least
    /// `abandon_after_ms + 2 × poll_max_ms` (a visitor coming near gets
    /// `abandon_after_ms` of grace, then one poll interval to be noticed
    /// and one for the leaver scan to come round).
    pub fn near_zone_ms(&self) -> u64 {
        self.exact_zone_ms.max(
            self.abandon_after_ms
                .saturating_add(self.poll_max_ms.saturating_mul(2)),
        )
    }

    /// The sleep grace in force: `sleep_grace_ms`, but at least
    /// `abandon_after_ms` (equal: no grace, a silent visitor is dropped
    /// after `abandon_after_ms` as before the grace existed).
    pub fn sleep_grace(&self) -> u64 {
        self.sleep_grace_ms.max(self.abandon_after_ms)
    }

    /// Visitors in the exact head at `rate` admissions per second (0 when
    /// it is off), at most the near zone's.
    pub fn exact_head_visitors(&self, rate: f64) -> u64 {
        if self.exact_head_ms == 0 {
            return 0;
        }
        let n = (rate.max(0.0) * self.exact_head_ms as f64 / 1_000.0).ceil();
        let n = if n.is_finite() && n >= 1.0 {
            n as u64
        } else {
            1
        };
        n.min(self.near_zone_visitors(rate))
    }

    /// How old a near visitor's last Redis request may be before its next
    /// poll goes to Redis again: half of `abandon_after_ms`, so with a poll
    /// at most `poll_max_ms` later (validated: at most half of it) it is
    /// never taken for a leaver.
    pub fn liveness_ms(&self) -> u64 {
        liveness_ms(self.abandon_after_ms)
    }

    /// Visitors in the near zone at `rate` admissions per second: at least
    /// one.
    pub fn near_zone_visitors(&self, rate: f64) -> u64 {
        let n = (rate.max(0.0) * self.near_zone_ms() as f64 / 1_000.0).ceil();
        if n.is_finite() && n >= 1.0 {
            n as u64
        } else {
            1
        }
    }

    /// The settings as config-hash fields (name → decimal text).
    pub fn to_fields(&self) -> Vec<(String, String)> {
        let value = serde_json::to_value(self).unwrap_or_default();
        let serde_json::Value::Object(map) = value else {
            return Vec::new();
        };
        map.into_iter().map(|(k, v)| (k, v.to_string())).collect()
    }

    /// Settings from config-hash fields. Unknown fields (such as the
    /// operator's `state`) are ignored; missing ones take their default.
    pub fn from_fields(fields: &BTreeMap<String, String>) -> Result<Settings, SettingsError> {
        let names = Settings::field_names();
        let mut map = serde_json::Map::new();
        for (field, text) in fields {
            if !names.contains(field) {
                continue;
            }
            let number: serde_json::Value =
                serde_json::from_str(text).map_err(|e| SettingsError::Stored {
                    field: field.clone(),
                    value: text.clone(),
                    why: e.to_string(),
                })?;
            map.insert(field.clone(), number);
        }
        let settings: Settings =
            serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| {
                SettingsError::Stored {
                    field: "config".into(),
                    value: String::new(),
                    why: e.to_string(),
                }
            })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Every setting's field name (the serde names, so there is no second
    /// list to keep in step).
    pub fn field_names() -> Vec<String> {
        Settings::default()
            .to_fields()
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    }
}

/// The operator's switch for a queue, kept in the config hash field
/// `state` and never overwritten when the scheduler publishes settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// Entering and admission run.
    Open,
    /// Visitors may enter; nobody is admitted.
    Paused,
    /// No new entries; the line is still admitted until empty.
    Draining,
    /// No new entries and no admission.
    Closed,
}

impl QueueState {
    /// The name stored in Redis.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueState::Open => "open",
            QueueState::Paused => "paused",
            QueueState::Draining => "draining",
            QueueState::Closed => "closed",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Option<QueueState> {
        match text {
            "open" => Some(QueueState::Open),
            "paused" => Some(QueueState::Paused),
            "draining" => Some(QueueState::Draining),
            "closed" => Some(QueueState::Closed),
            _ => None,
        }
    }

    /// Whether new visitors may take a ticket.
    pub fn accepts_entries(self) -> bool {
        matches!(self, QueueState::Open | QueueState::Paused)
    }

    /// Whether the scheduler admits.
    pub fn admits(self) -> bool {
        matches!(self, QueueState::Open | QueueState::Draining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue #37's first invariant at the edge: a near visitor answered
    /// there polls Redis again within three quarters of abandon_after of
    /// its last Redis request, whatever it is told, so a quarter is left
    /// for a late poll and a slow request. Before, with poll_max_ms at
    /// half of abandon_after, the next Redis request could be due at
    /// exactly abandon_after: no room for any latency.
    #[test]
    fn an_edge_answer_leaves_a_quarter_of_abandon_after_for_the_next_redis_request() {
        let abandon = 90_000;
        for retry in [1_000, 10_000, 30_000, 45_000] {
            for since in (0..abandon).step_by(500) {
                if edge_may_answer(abandon, since, retry) {
                    assert!(since + retry <= abandon * 3 / 4, "{since} {retry}");
                    assert!(since < liveness_ms(abandon));
                }
            }
        }
        // The old rule's worst case: answered at 44 s with 45 s to go.
        assert!(!edge_may_answer(abandon, 44_000, 45_000));
        // A recent request and a short retry still answer at the edge.
        assert!(edge_may_answer(abandon, 10_000, 30_000));
        assert!(edge_may_answer(4_000, 1_500, 1_000));
        assert!(!edge_may_answer(4_000, 2_100, 500));
    }

    #[test]
    fn defaults_are_valid_and_match_the_seed_design() {
        let s = Settings::default();
        s.validate().unwrap();
        assert_eq!(s.challenge_crowd, (300.0 * s.admit_rate_per_second) as u64);
        assert_eq!(s.max_waiting, 10_000_000);
        // The exact head: 5 s at 175/s; never more than the near zone.
        assert_eq!(s.exact_head_visitors(175.0), 875);
        let wide = Settings {
            exact_head_ms: 600_000,
            ..Settings::default()
        };
        assert_eq!(wide.exact_head_visitors(175.0), s.near_zone_visitors(175.0));
        let off = Settings {
            exact_head_ms: 0,
            ..Settings::default()
        };
        assert_eq!(off.exact_head_visitors(175.0), 0);
        assert_eq!(s.liveness_ms(), 45_000);
        // A locked phone keeps its place 5 minutes.
        assert_eq!(s.sleep_grace(), 5 * 60_000);
        assert_eq!(s.tick_ms, 100);
        assert_eq!(s.token_ttl_ms, 5 * 60_000);
        assert_eq!(s.status_ttl_ms, 7 * 60_000);
    }

    #[test]
    fn the_sleep_grace_is_at_least_the_abandon_timeout() {
        let short = Settings {
            sleep_grace_ms: 10_000,
            ..Settings::default()
        };
        short.validate().unwrap();
        assert_eq!(short.sleep_grace(), short.abandon_after_ms);
        let longest = Settings {
            sleep_grace_ms: MAX_SLEEP_GRACE_MS,
            ..Settings::default()
        };
        longest.validate().unwrap();
        assert_eq!(longest.sleep_grace(), MAX_SLEEP_GRACE_MS);
        let err = Settings {
            sleep_grace_ms: MAX_SLEEP_GRACE_MS + 1,
            ..Settings::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "sleep_grace_ms = 1800001: must be at most 1800000 (30 minutes); at least abandon_after_ms is used"
        );
    }

    #[test]
    fn fields_round_trip() {
        let s = Settings {
            admit_rate_per_second: 17.5,
            max_active: 3,
            ..Settings::default()
        };
        let mut map: BTreeMap<String, String> = s.to_fields().into_iter().collect();
        map.insert("state".into(), "paused".into());
        assert_eq!(Settings::from_fields(&map).unwrap(), s);
        assert_eq!(map["admit_rate_per_second"], "17.5");
    }

    #[test]
    fn stored_garbage_is_reported_by_field() {
        let map = BTreeMap::from([("max_active".to_string(), "lots".to_string())]);
        let err = Settings::from_fields(&map).unwrap_err();
        assert!(err.to_string().contains("max_active"), "{err}");
    }

    #[test]
    fn validation_rejects_what_would_break_guarantees() {
        let cases: Vec<(Settings, &str)> = vec![
            (
                Settings {
                    tick_ms: 0,
                    ..Default::default()
                },
                "tick_ms",
            ),
            (
                Settings {
                    admit_rate_per_second: 0.0,
                    ..Default::default()
                },
                "admit_rate_per_second",
            ),
            (
                Settings {
                    admit_rate_per_second: f64::NAN,
                    ..Default::default()
                },
                "admit_rate_per_second",
            ),
            (
                Settings {
                    max_active: 0,
                    ..Default::default()
                },
                "max_active",
            ),
            (
                Settings {
                    max_waiting: 0,
                    ..Default::default()
                },
                "max_waiting",
            ),
            (
                Settings {
                    status_ttl_ms: 300_000,
                    ..Default::default()
                },
                "status_ttl_ms",
            ),
            (
                Settings {
                    poll_min_ms: 40_000,
                    ..Default::default()
                },
                "poll_min_ms",
            ),
            (
                Settings {
                    abandon_after_ms: 30_000,
                    ..Default::default()
                },
                "abandon_after_ms",
            ),
            (
                Settings {
                    sleep_grace_ms: MAX_SLEEP_GRACE_MS + 1,
                    ..Default::default()
                },
                "sleep_grace_ms",
            ),
            (
                Settings {
                    opening_spread_ms: 600_001,
                    ..Default::default()
                },
                "opening_spread_ms",
            ),
            (
                Settings {
                    draw_batch: 0,
                    ..Default::default()
                },
                "draw_batch",
            ),
            (
                Settings {
                    lease_ttl_ms: 200,
                    ..Default::default()
                },
                "lease_ttl_ms",
            ),
            (
                Settings {
                    activation_jitter_ms: 300_000,
                    ..Default::default()
                },
                "activation_jitter_ms",
            ),
            (
                Settings {
                    in_flight_ms: 10,
                    ..Default::default()
                },
                "in_flight_ms",
            ),
            (
                Settings {
                    sweep_limit: 0,
                    ..Default::default()
                },
                "sweep_limit",
            ),
            (
                Settings {
                    entry_budget_burst: 0,
                    ..Default::default()
                },
                "entry_budget_burst",
            ),
            (
                Settings {
                    challenge_max_number: 10,
                    ..Default::default()
                },
                "challenge_max_number",
            ),
            (
                Settings {
                    challenge_crowd: 0,
                    ..Default::default()
                },
                "challenge_crowd",
            ),
            (
                Settings {
                    exact_head_ms: MAX_EXACT_ZONE_MS + 1,
                    ..Default::default()
                },
                "exact_head_ms",
            ),
            (
                Settings {
                    entry_places_per_address: MAX_PLACES_PER_ADDRESS + 1,
                    ..Default::default()
                },
                "entry_places_per_address",
            ),
            (
                Settings {
                    challenge_ttl_ms: 0,
                    ..Default::default()
                },
                "challenge_ttl_ms",
            ),
            (
                Settings {
                    challenge_ttl_ms: 120_001,
                    ..Default::default()
                },
                "challenge_ttl_ms",
            ),
            (
                Settings {
                    min_admit_rate_per_second: 200.0,
                    ..Default::default()
                },
                "min_admit_rate_per_second",
            ),
            (
                Settings {
                    min_admit_rate_per_second: 0.0,
                    ..Default::default()
                },
                "min_admit_rate_per_second",
            ),
            (
                Settings {
                    origin_window_ms: 120_000,
                    ..Default::default()
                },
                "origin_window_ms",
            ),
            (
                Settings {
                    origin_min_samples: 0,
                    ..Default::default()
                },
                "origin_min_samples",
            ),
            (
                Settings {
                    origin_max_error_share: 1.0,
                    ..Default::default()
                },
                "origin_max_error_share",
            ),
            (
                Settings {
                    origin_max_error_share: f64::NAN,
                    ..Default::default()
                },
                "origin_max_error_share",
            ),
            (
                Settings {
                    origin_p95_target_ms: 10,
                    ..Default::default()
                },
                "origin_p95_target_ms",
            ),
            (
                Settings {
                    origin_decrease_factor: 1.0,
                    ..Default::default()
                },
                "origin_decrease_factor",
            ),
            (
                Settings {
                    origin_recover_ms: 0,
                    ..Default::default()
                },
                "origin_recover_ms",
            ),
        ];
        for (s, field) in cases {
            let err = s.validate().expect_err(field);
            assert!(err.to_string().starts_with(field), "{field}: {err}");
        }
    }

    #[test]
    fn queue_states_round_trip() {
        for s in [
            QueueState::Open,
            QueueState::Paused,
            QueueState::Draining,
            QueueState::Closed,
        ] {
            assert_eq!(QueueState::parse(s.as_str()), Some(s));
        }
        assert_eq!(QueueState::parse("OPEN"), None);
        assert!(QueueState::Paused.accepts_entries() && !QueueState::Paused.admits());
        assert!(!QueueState::Draining.accepts_entries() && QueueState::Draining.admits());
    }
}
