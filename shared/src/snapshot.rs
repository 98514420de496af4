//! The queue as the edge sees it between Redis calls: the snapshot each
//! admit tick writes into the config hash, and the estimate it gives a
//! visitor far from the head (docs/uncapped-line.md). A far-back poll is
//! answered from the snapshot and the visitor's signed ticket alone; near
//! the head, or whenever the snapshot cannot be trusted, the edge asks
//! Redis as before.

/// Which answers a poll: the snapshot or Redis.
pub mod answer;

use std::sync::Arc;

use crate::chance::StockView;
use crate::draw::{DrawPermutation, DrawSlot, MovedSeats};
use crate::fields::config;
use crate::ops::{parse_rounds, DrawSeed};
use crate::policy::{PollPolicy, PreQueuePolicy};
use crate::settings::{edge_may_answer, QueueState};
use crate::state::UserState;

/// A snapshot older than this (by Redis' clock against the edge's) is
/// never used, whatever its writer's lease: the scheduler has stopped
/// ticking, or the clocks disagree. Below it, the writer's lease decides
/// ([`Snapshot::has_live_writer`], [`Snapshot::is_fresh`]).
pub const MAX_AGE_MS: u64 = 10_000;

/// How far the edge's clock and Redis' may disagree for a snapshot's
/// lease to be judged by them (both keep NTP time; a larger gap only
/// sends far-back polls to Redis).
pub const CLOCK_TOLERANCE_MS: u64 = 1_000;

/// How long an isolate keeps a snapshot before it reads a new one. Its
/// estimates are moved on by the admissions since it was written (the
/// measured rate over its age), and the exact head is checked against that
/// aged position, so a snapshot some seconds old answers as well as a new
/// one; each isolate's refreshes are what one Redis pays for a fleet of
/// them (1,000 isolates: 200 a second; BENCHMARKS.md).
pub const REFRESH_MS: u64 = 5_000;

/// Declares [`FIELDS`] and [`Field`], each one's index in it: the decoder
/// reads a field by its name, so the order is written once, here.
macro_rules! snapshot_fields {
    ($($name:ident = $field:path,)*) => {
        /// The index of each of [`FIELDS`] (in the `HMGET` reply too).
        #[derive(Debug, Clone, Copy)]
        enum Field {
            $($name,)*
        }

        /// The config fields a snapshot is read from, in [`Snapshot::decode`]'s
        /// order (one `HMGET`).
        pub const FIELDS: [&str; [$(stringify!($name)),*].len()] = [$($field),*];
    };
}

snapshot_fields! {
    ZoneFront = config::ZONE_FRONT,
    ZoneCount = config::ZONE_COUNT,
    Tail = config::TAIL,
    Waiting = config::WAITING,
    SnapAt = config::SNAP_AT,
    State = config::STATE,
    DrawLeft = config::DRAW_LEFT,
    MeasuredRate = config::MEASURED_RATE,
    AdmitRate = config::ADMIT_RATE_PER_SECOND,
    PollMin = config::POLL_MIN_MS,
    PollMax = config::POLL_MAX_MS,
    Marks = config::MARKS,
    OpensAt = config::OPENS_AT,
    OpeningSpread = config::OPENING_SPREAD_MS,
    AbandonAfter = config::ABANDON_AFTER_MS,
    DrawBase = config::DRAW_BASE,
    DrawEnd = config::DRAW_END,
    DrawRounds = config::DRAW_ROUNDS,
    DrawSeed = config::DRAW_SEED,
    DrawNumber = config::DRAW_NUMBER,
    DrawAhead = config::DRAW_AHEAD,
    HeadFront = config::HEAD_FRONT,
    HeadCount = config::HEAD_COUNT,
    Notice = config::NOTICE,
    NoticeTexts = config::NOTICE_TEXTS,
    MarksShift = config::MARKS_SHIFT,
    SnapTtl = config::SNAP_TTL,
    DrawShuffle = config::DRAW_SHUFFLE,
    StockLeft = config::STOCK_LEFT,
    StockOut = config::STOCK_OUT,
    StockConv = config::STOCK_CONV,
    StockPerOrder = config::STOCK_PER_ORDER,
}

/// The last sealed draw, as far as the edge can evaluate it: its seed is
/// set and its rounds were kept.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapDraw {
    /// The last ticket before its reserved range.
    pub base: u64,
    /// Its rounds' sizes from round 1.
    pub rounds: Vec<u64>,
    /// Its permutation's seed.
    pub seed: DrawSeed,
    /// Visitors in line ahead of the range at sealing.
    pub ahead: u64,
    /// Its address groups with more than one identity had their seats
    /// dealt among them after the seal (`draw_shuffle` set): a slot
    /// signed at the enter may now be another identity's. Only a round-1
    /// slot that [`moved`](SnapDraw::moved) does not list is answered here
    /// then; any other asks Redis once and gets its ticket.
    pub dealt: bool,
    /// The round-1 seats the deal may have moved, once the edge has read
    /// them (`draw_moved`, once per draw and isolate); None: not read,
    /// every slot of a dealt draw asks Redis.
    pub moved: Option<Arc<MovedSeats>>,
}

/// What the snapshot says to a visitor holding a draw slot.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotAnswer {
    /// The answer itself: still pre-queued, or drawn while the draw runs.
    State(UserState),
    /// The drawn ticket: the draw is over, and the visitor is answered as
    /// one holding this ticket.
    Ticket(u64),
}

/// One queue's snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The near zone's last ticket.
    pub zone_front: u64,
    /// Visitors at or before it.
    pub zone_count: u64,
    /// The last ticket in line.
    pub tail: u64,
    /// The line's length.
    pub waiting: u64,
    /// Redis' clock when the tick wrote it (epoch ms).
    pub snap_at: u64,
    /// The lease that tick left its writer (ms; None: written by a
    /// scheduler that does not say, judged by [`MAX_AGE_MS`] alone).
    pub snap_ttl: Option<u64>,
    /// Whether its writer could still hold the lease when the isolate read
    /// it ([`Snapshot::has_live_writer`]; true as decoded). A snapshot
    /// without one is kept for the operator's notice, but answers no poll.
    pub live_writer: bool,
    /// The operator's state.
    pub state: QueueState,
    /// Visitors a running draw has still to place (0: none runs).
    pub draw_left: u64,
    /// The measured admission rate, if any.
    pub measured_rate: Option<f64>,
    /// The poll policy the settings imply.
    pub policy: PollPolicy,
    /// Points `(rank, ticket)` of the far part's rank-to-ticket map, in
    /// order (up to a second older than the rest).
    pub marks: Vec<(u64, u64)>,
    /// The scheduled opening, if any.
    pub opens_at: Option<u64>,
    /// The pre-queue's poll policy.
    pub pre_policy: PreQueuePolicy,
    /// The exact head's last ticket (0: no head).
    pub head_front: u64,
    /// Visitors at or before it.
    pub head_count: u64,
    /// The number of the last sealed draw (0: none yet).
    pub sealed: u64,
    /// The last draw, when its slots can be evaluated here.
    pub draw: Option<SnapDraw>,
    /// The operator's notice to the line, if any: its default text.
    pub notice: Option<String>,
    /// The notice's texts per language besides the default
    /// (`crate::notice::for_language` picks a visitor's).
    pub notice_texts: Vec<(String, String)>,
    /// The queue's kept stock, if any (docs/drop-day.md, *Stock*).
    pub stock: Option<StockView>,
}

impl Snapshot {
    /// Reads an `HMGET` of [`FIELDS`]; `None` when the queue has no
    /// snapshot yet (no tick has run since this version) or a field is
    /// unreadable.
    pub fn decode(values: &[Option<String>]) -> Option<Snapshot> {
        if values.len() != FIELDS.len() {
            return None;
        }
        let text = |at: Field| values[at as usize].as_deref().filter(|t| !t.is_empty());
        let int = |at: Field| text(at)?.parse::<u64>().ok();
        let float = |at: Field| text(at)?.parse::<f64>().ok().filter(|v| v.is_finite());
        Some(Snapshot {
            zone_front: int(Field::ZoneFront)?,
            zone_count: int(Field::ZoneCount)?,
            tail: int(Field::Tail)?,
            waiting: int(Field::Waiting)?,
            snap_at: int(Field::SnapAt)?,
            snap_ttl: int(Field::SnapTtl),
            live_writer: true,
            state: QueueState::parse(text(Field::State)?)?,
            draw_left: text(Field::DrawLeft).map_or(Some(0), |t| t.parse().ok())?,
            measured_rate: float(Field::MeasuredRate),
            policy: PollPolicy {
                admit_rate_per_second: float(Field::AdmitRate)?,
                poll_min_ms: int(Field::PollMin)?,
                poll_max_ms: int(Field::PollMax)?,
            },
            marks: text(Field::Marks)
                .map(|t| parse_marks(t, int(Field::MarksShift).unwrap_or(0)))
                .unwrap_or_default(),
            opens_at: int(Field::OpensAt),
            pre_policy: PreQueuePolicy {
                poll_min_ms: int(Field::PollMin)?,
                poll_max_ms: int(Field::PollMax)?,
                opening_spread_ms: int(Field::OpeningSpread)?,
                abandon_after_ms: int(Field::AbandonAfter)?,
            },
            head_front: int(Field::HeadFront).unwrap_or(0),
            head_count: int(Field::HeadCount).unwrap_or(0),
            notice: text(Field::Notice).map(String::from),
            notice_texts: text(Field::NoticeTexts)
                .map(crate::notice::decode_texts)
                .unwrap_or_default(),
            sealed: int(Field::DrawNumber).unwrap_or(0),
            stock: int(Field::StockLeft).map(|left| StockView {
                left,
                out: int(Field::StockOut).unwrap_or(0),
                conversion: int(Field::StockConv).map(|c| c as f64 / 1000.0),
                units_per_order: int(Field::StockPerOrder).map(|u| u as f64 / 1000.0),
            }),
            draw: (|| {
                let base = int(Field::DrawBase)?;
                Some(SnapDraw {
                    base,
                    rounds: parse_rounds(
                        text(Field::DrawRounds)?,
                        int(Field::DrawEnd)?.checked_sub(base)?,
                    )?,
                    seed: DrawSeed::parse(text(Field::DrawSeed)?)?,
                    ahead: int(Field::DrawAhead)?,
                    dealt: text(Field::DrawShuffle).is_some_and(|t| !t.is_empty()),
                    moved: None,
                })
            })(),
        })
    }

    /// The answer for a visitor whose signed slot is `slot` in draw
    /// number `number`, at `now_ms`; `spread` in `[0, 1)` is this reply's
    /// random draw for the opening's spread window. `None` sends the poll
    /// to Redis.
    ///
    /// Before that draw is sealed the visitor is pre-queued for the
    /// scheduled opening; once it is sealed and seeded, its place is the
    /// permutation's
    /// (shared/src/draw.rs), the same the scheduler places it on: while the
    /// draw runs it waits behind the visitors ahead of the range, and once
    /// the draw is over it holds its ticket.
    pub fn slot(
        &self,
        number: u64,
        slot: DrawSlot,
        now_ms: u64,
        spread: f64,
    ) -> Option<SlotAnswer> {
        if !self.is_fresh(now_ms) || self.state == QueueState::Closed {
            return None;
        }
        if number == self.sealed {
            let d = self.draw.as_ref()?;
            if d.dealt {
                // Only a round-1 seat whose group had one identity is
                // still the one its cookie names.
                let moved = d.moved.as_ref().filter(|m| m.draw == number)?;
                if slot.round != 1 || moved.contains(slot.index) {
                    return None;
                }
            }
            let place =
                DrawPermutation::new(&d.seed.bytes()).place(&d.rounds, slot.round, slot.index)?;
            if self.draw_left == 0 {
                return Some(SlotAnswer::Ticket(d.base + place + 1));
            }
            let position = d.ahead + place + 1;
            let admitting = self.state.admits();
            return Some(SlotAnswer::State(UserState::Waiting {
                position,
                eta_seconds: self
                    .policy
                    .eta_seconds(position, self.measured_rate, admitting),
                retry_after_ms: self
                    .policy
                    .retry_after_ms(position, self.measured_rate, admitting),
                approximate: true,
            }));
        }
        let opens = self.opens_at.filter(|_| number == self.sealed + 1)?;
        Some(SlotAnswer::State(UserState::PreQueue {
            opens_at: opens,
            retry_after_ms: self.pre_policy.retry_after_ms(opens, now_ms, spread),
        }))
    }

    /// Whether the snapshot may answer at `now_ms` (the edge's clock): no
    /// older than the lease its writer held when an isolate last read it
    /// ([`Self::has_live_writer`]) plus that isolate's [`REFRESH_MS`], and
    /// never older than [`MAX_AGE_MS`]. A scheduler that stops therefore
    /// stops the edge's far-back answers within its lease and one refresh
    /// (8 s at the defaults), after which Redis answers, exactly.
    pub fn is_fresh(&self, now_ms: u64) -> bool {
        if !self.live_writer {
            return false;
        }
        let limit = self.snap_ttl.map_or(MAX_AGE_MS, |ttl| {
            ttl.saturating_add(CLOCK_TOLERANCE_MS + REFRESH_MS)
                .min(MAX_AGE_MS)
        });
        now_ms.abs_diff(self.snap_at) <= limit
    }

    /// Whether the snapshot, read at `read_ms` (the edge's clock), was
    /// written by a scheduler that may still hold its lease: one that has
    /// not ticked for longer than the lease its last tick left it has lost
    /// the lease, and nothing moves the line its snapshot describes. An
    /// isolate marks such a snapshot ([`Snapshot::live_writer`]): its polls
    /// ask Redis until the next refresh finds a live writer again, and the
    /// operator's notice in it still reaches them.
    pub fn has_live_writer(&self, read_ms: u64) -> bool {
        match self.snap_ttl {
            Some(ttl) => {
                read_ms.saturating_sub(self.snap_at) <= ttl.saturating_add(CLOCK_TOLERANCE_MS)
                    && self.is_fresh(read_ms)
            }
            None => self.is_fresh(read_ms),
        }
    }

    /// The answer for a visitor holding `ticket`, when it is far back:
    /// beyond the near zone, in a line that is not being drawn, under a
    /// fresh snapshot. `None` sends the poll to Redis.
    ///
    /// The estimate interpolates the rank between the two points of the
    /// rank-to-ticket map around the ticket: the zone's front, the marks
    /// (at ranks growing by a fifth) and the tail. Far back nobody is
    /// dropped for silence, so the far part's gaps are the few left by a
    /// draw's leavers and by rejoins, and the marks bound how unevenly
    /// they can lie within one stretch; the error is measured
    /// (tests/system/tests/drop_day/far_back.rs, BENCHMARKS.md). The next poll comes when the policy says, but no later than
    /// the visitor's arrival in the near zone, where it must poll Redis to
    /// keep its place.
    pub fn far_back(&self, ticket: u64, now_ms: u64) -> Option<UserState> {
        let admitting = self.admitting_now(now_ms)?;
        if ticket <= self.zone_front || ticket > self.tail || self.waiting <= self.zone_count {
            return None;
        }
        let at_snapshot = self.between(
            (self.zone_count, self.zone_front),
            (self.waiting, self.tail),
            ticket,
        );
        let position = self.aged(at_snapshot, now_ms, admitting);
        // Reached by the zone since the snapshot: near, not far ([`Self::near`]).
        if admitting && position <= self.zone_reach() {
            return None;
        }
        let policy = self.policy;
        let retry_after_ms = if admitting {
            let rate = policy.effective_rate(self.measured_rate);
            // From the aged place, not the snapshot's: a snapshot some
            // seconds old would otherwise time the poll that many seconds
            // after the zone arrived, eating into the visitor's
            // abandon_after to prove it is alive.
            let until_near_ms =
                (position.saturating_sub(self.zone_count) as f64 / rate * 1_000.0) as u64;
            policy
                .retry_after_ms(position, self.measured_rate, true)
                .min(until_near_ms.max(policy.poll_min_ms))
        } else {
            policy.poll_max_ms
        };
        Some(UserState::Waiting {
            position,
            eta_seconds: policy.eta_seconds(position, self.measured_rate, admitting),
            retry_after_ms,
            approximate: true,
        })
    }

    /// The answer for a visitor holding `ticket` in the near zone behind
    /// the exact head, whose last Redis request was at `seen_ms` (the
    /// edge's clock, signed into its place cookie). `None` sends the poll
    /// to Redis: in the head (exact positions, the notice of admission),
    /// when the last Redis request is [`Settings::liveness_ms`] old or the
    /// next poll would come too late to reach Redis in time
    /// ([`edge_may_answer`]: the visitor must prove it is alive, and only
    /// Redis marks it seen), without a
    /// head, or under a snapshot that cannot answer.
    ///
    /// [`Settings::liveness_ms`]: crate::Settings::liveness_ms
    pub fn near(&self, ticket: u64, seen_ms: u64, now_ms: u64) -> Option<UserState> {
        let admitting = self.admitting_now(now_ms)?;
        if self.head_count == 0
            || ticket <= self.head_front
            || ticket > self.tail
            || self.zone_count <= self.head_count
        {
            return None;
        }
        // The zone's front never moves back, so it may lie past the tail
        // (everyone behind it left): the last visitor is then the zone's.
        let zone_end = self.zone_front.min(self.tail);
        let position = if ticket <= zone_end {
            let at_snapshot = self.between(
                (self.head_count, self.head_front),
                (self.zone_count, zone_end),
                ticket,
            );
            self.aged(at_snapshot, now_ms, admitting)
        } else {
            // Beyond the snapshot's zone: near only if the zone has reached
            // it since. The scheduler moves the zone's front every tick, an
            // isolate reads the snapshot only every REFRESH_MS, and a
            // visitor the front passed has abandon_after from then to prove
            // it is alive (which may be shorter than the snapshot's age):
            // so it is answered as near, under the liveness rule, not as far.
            let at_snapshot = self.between(
                (self.zone_count, self.zone_front),
                (self.waiting, self.tail),
                ticket,
            );
            let position = self.aged(at_snapshot, now_ms, admitting);
            if !admitting || position > self.zone_reach() {
                return None;
            }
            position
        };
        // The head has moved on since the snapshot: whoever it holds now
        // asks Redis.
        if position <= self.head_count {
            return None;
        }
        let policy = self.policy;
        let retry_after_ms = policy.retry_after_ms(position, self.measured_rate, admitting);
        // Liveness: only Redis marks the visitor seen, so the edge answers
        // only while the next poll still comes in time to reach Redis.
        let since = now_ms.saturating_sub(seen_ms);
        if !edge_may_answer(self.pre_policy.abandon_after_ms, since, retry_after_ms) {
            return None;
        }
        Some(UserState::Waiting {
            position,
            eta_seconds: policy.eta_seconds(position, self.measured_rate, admitting),
            retry_after_ms,
            approximate: true,
        })
    }

    /// The aged rank up to which the near zone reaches now: its size, and
    /// to spare for the rate's error a second of admissions at the measured
    /// rate, at most a quarter of the zone (a visitor counted near a little
    /// early only asks Redis a little sooner).
    fn zone_reach(&self) -> u64 {
        let second = self.measured_rate.map_or(0.0, |r| r.max(0.0).ceil()) as u64;
        self.zone_count
            .saturating_add(second.min(self.zone_count / 4))
    }

    /// Whether the queue admits, when the snapshot may answer a waiting
    /// visitor at `now_ms` at all: fresh, no draw running, not closed.
    fn admitting_now(&self, now_ms: u64) -> Option<bool> {
        if !self.is_fresh(now_ms) || self.draw_left > 0 {
            return None;
        }
        match self.state {
            QueueState::Open | QueueState::Draining => Some(true),
            QueueState::Paused => Some(false),
            QueueState::Closed => None,
        }
    }

    /// A rank read from the snapshot, moved on by the admissions since it
    /// was written (the measured rate over its age, when the scheduler
    /// has measured one), at least 1.
    fn aged(&self, rank: u64, now_ms: u64, admitting: bool) -> u64 {
        let Some(rate) = self.measured_rate.filter(|r| *r > 0.0 && admitting) else {
            return rank;
        };
        let since = (rate * now_ms.saturating_sub(self.snap_at) as f64 / 1_000.0).floor();
        let since = if since.is_finite() && since > 0.0 {
            since as u64
        } else {
            0
        };
        rank.saturating_sub(since).max(1)
    }
}

impl Snapshot {
    /// The rank of `ticket` (beyond the point `lo`, at most `hi`; points
    /// are `(rank, ticket)`) between the map's points around it.
    fn between(&self, lo: (u64, u64), hi: (u64, u64), ticket: u64) -> u64 {
        let (mut lo, mut hi) = (lo, hi);
        // Marks written before the latest pops may lie at or before the
        // front now, or past the tail; only increasing points between
        // them count.
        for &(rank, at) in &self.marks {
            if rank <= lo.0 || at <= lo.1 || rank >= hi.0 || at >= hi.1 {
                continue;
            }
            if at < ticket {
                lo = (rank, at);
            } else {
                hi = (rank, at);
                break;
            }
        }
        let ahead = ((ticket - lo.1) as f64 * (hi.0 - lo.0) as f64 / (hi.1 - lo.1) as f64).ceil();
        lo.0 + (ahead as u64).clamp(1, hi.0 - lo.0)
    }
}

/// `rank:ticket,…` as the admit tick writes it, each rank moved on by
/// `shift` (the visitors gone from ahead of the marks since they were
/// written); an unreadable pair, or one the shift leaves no rank, is
/// skipped.
fn parse_marks(text: &str, shift: u64) -> Vec<(u64, u64)> {
    text.split(',')
        .filter_map(|pair| {
            let (rank, ticket) = pair.split_once(':')?;
            let rank = rank.parse::<u64>().ok()?.checked_sub(shift)?;
            Some((rank, ticket.parse().ok()?)).filter(|(r, _)| *r > 0)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) const NOW: u64 = 1_800_000_000_000;

    /// A line of 1,000,000, its near zone 31,500 long, admitting 175 a
    /// second, no exact head (answer.rs's tests share it).
    pub(crate) fn snapshot() -> Snapshot {
        Snapshot {
            zone_front: 31_500,
            zone_count: 31_500,
            tail: 1_000_000,
            waiting: 1_000_000,
            snap_at: NOW,
            snap_ttl: Some(2_000),
            live_writer: true,
            state: QueueState::Open,
            draw_left: 0,
            measured_rate: Some(175.0),
            policy: PollPolicy {
                admit_rate_per_second: 175.0,
                poll_min_ms: 1_000,
                poll_max_ms: 30_000,
            },
            marks: Vec::new(),
            opens_at: None,
            pre_policy: PreQueuePolicy {
                poll_min_ms: 1_000,
                poll_max_ms: 30_000,
                opening_spread_ms: 30_000,
                abandon_after_ms: 90_000,
            },
            head_front: 0,
            head_count: 0,
            sealed: 0,
            draw: None,
            notice: None,
            notice_texts: Vec::new(),
            stock: None,
        }
    }

    fn waiting(s: &UserState) -> (u64, Option<u64>, u64) {
        match s {
            UserState::Waiting {
                position,
                eta_seconds,
                retry_after_ms,
                approximate: true,
            } => (*position, *eta_seconds, *retry_after_ms),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_dense_line_gives_the_exact_rank() {
        let s = snapshot();
        let (position, eta, retry) = waiting(&s.far_back(500_000, NOW).unwrap());
        assert_eq!(position, 500_000);
        assert_eq!(eta, Some(2_858)); // 500,000 / 175 = 2,857.1
        assert_eq!(retry, 30_000);
    }

    #[test]
    fn gaps_are_spread_over_the_far_part() {
        // 10 % of the far part's tickets are gone.
        let s = Snapshot {
            waiting: 31_500 + 871_650,
            ..snapshot()
        };
        let (position, ..) = waiting(&s.far_back(500_000, NOW).unwrap());
        assert_eq!(position, 31_500 + 421_650);
    }

    #[test]
    fn marks_place_uneven_gaps() {
        // The first 100,000 far tickets lost half their visitors (a draw's
        // leavers); the rest is dense. Without marks the gaps are spread
        // over everything; with one at the block's end the rank is exact.
        let s = Snapshot {
            waiting: 1_000_000 - 50_000,
            ..snapshot()
        };
        let (plain, ..) = waiting(&s.far_back(131_500, NOW).unwrap());
        let marked = Snapshot {
            marks: vec![(81_500, 131_500), (500_000, 550_000)],
            ..s.clone()
        };
        let (exact, ..) = waiting(&marked.far_back(131_500, NOW).unwrap());
        assert_eq!(exact, 81_500);
        assert!(plain > 125_000, "{plain}");
        let (later, ..) = waiting(&marked.far_back(600_000, NOW).unwrap());
        assert_eq!(later, 550_000);
        // Marks out of order, at or before the front or past the tail
        // are ignored.
        let odd = Snapshot {
            marks: vec![
                (10, 20),
                (81_500, 131_500),
                (60_000, 140_000),
                (2_000_000, 2_000_000),
            ],
            ..s
        };
        assert_eq!(waiting(&odd.far_back(131_500, NOW).unwrap()).0, 81_500);
    }

    #[test]
    fn the_next_poll_comes_no_later_than_the_near_zone() {
        let s = snapshot();
        // 700 behind the zone: 4 s at 175/s.
        let (_, _, retry) = waiting(&s.far_back(32_200, NOW).unwrap());
        assert_eq!(retry, 4_000);
        // Two seconds behind it: back by the time the zone reaches it.
        let (_, _, retry) = waiting(&s.far_back(31_850, NOW).unwrap());
        assert!((1_000..=2_000).contains(&retry), "{retry}");
        // Within a second of admissions behind it: near by now (below).
        assert!(s.far_back(31_501, NOW).is_none());
    }

    /// The zone's front moves every tick, the snapshot only when an isolate
    /// reads it again: a ticket the front has reached since (by the
    /// admissions at the measured rate over the snapshot's age) is sent to
    /// Redis, to prove it is alive within its grace, not answered as far.
    #[test]
    fn a_far_answer_times_the_next_poll_from_the_aged_place() {
        let s = snapshot();
        // 700 behind the zone at the snapshot, 4 s at 175/s; 2 s later
        // 350 are to go: the next poll comes within 2 s, not 4 s after.
        let (_, _, retry) = waiting(&s.far_back(32_200, NOW + 2_000).unwrap());
        assert!(retry <= 2_000, "{retry}");
    }

    #[test]
    fn a_ticket_the_zone_has_reached_since_the_snapshot_asks_redis() {
        let s = snapshot();
        // 700 behind the zone: far back at the snapshot's time ...
        assert!(s.far_back(32_200, NOW).is_some());
        // ... and still 2 s later (350 admitted at 175/s, 350 to go) ...
        assert!(s.far_back(32_200, NOW + 2_000).is_some());
        // ... but 3.5 s later the zone (and a second's spare) holds it:
        // near, answered under the liveness rule (a recent Redis request
        // gets an estimate, an old one asks Redis).
        assert!(s.far_back(32_200, NOW + 3_500).is_none());
        let h = with_head();
        assert!(h.far_back(32_200, NOW + 3_500).is_none());
        assert!(h.near(32_200, NOW + 3_000, NOW + 3_500).is_some());
        let liveness = crate::settings::liveness_ms(h.pre_policy.abandon_after_ms);
        assert!(h.near(32_200, NOW, NOW + liveness).is_none());
        // Not reached yet: not near either (the far answer stands).
        assert!(h.near(32_200, NOW + 1_900, NOW + 2_000).is_none());
    }

    #[test]
    fn near_stale_drawing_closed_or_unknown_tickets_go_to_redis() {
        let s = snapshot();
        assert!(s.far_back(31_500, NOW).is_none(), "near");
        assert!(s.far_back(1_000_001, NOW).is_none(), "beyond the tail");
        assert!(s.far_back(500_000, NOW + MAX_AGE_MS + 1).is_none(), "stale");
        let drawing = Snapshot {
            draw_left: 3,
            ..snapshot()
        };
        assert!(drawing.far_back(500_000, NOW).is_none());
        let closed = Snapshot {
            state: QueueState::Closed,
            ..snapshot()
        };
        assert!(closed.far_back(500_000, NOW).is_none());
        let all_near = Snapshot {
            waiting: 31_500,
            ..snapshot()
        };
        assert!(all_near.far_back(500_000, NOW).is_none());
    }

    #[test]
    fn paused_far_back_visitors_get_no_eta_and_the_longest_interval() {
        let paused = Snapshot {
            state: QueueState::Paused,
            ..snapshot()
        };
        let (_, eta, retry) = waiting(&paused.far_back(500_000, NOW).unwrap());
        assert_eq!((eta, retry), (None, 30_000));
    }

    #[test]
    fn decode_reads_an_hmget_and_refuses_a_partial_one() {
        let full: Vec<Option<String>> = [
            "31500",
            "31500",
            "1000000",
            "1000000",
            "1800000000000",
            "open",
            "",
            "175.000",
            "175",
            "1000",
            "30000",
            "",
            "",
            "30000",
            "90000",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
            "2000",
            "",
            "",
            "",
            "",
            "",
        ]
        .iter()
        .map(|t| Some(t.to_string()))
        .collect();
        assert_eq!(Snapshot::decode(&full), Some(snapshot()));
        // A kept stock comes with it, its measurements once made.
        let mut kept = full.clone();
        kept[Field::StockLeft as usize] = Some("40".into());
        kept[Field::StockOut as usize] = Some("5".into());
        kept[Field::StockConv as usize] = Some("500".into());
        assert_eq!(
            Snapshot::decode(&kept).and_then(|s| s.stock),
            Some(StockView {
                left: 40,
                out: 5,
                conversion: Some(0.5),
                units_per_order: None,
            })
        );
        // A scheduler that does not say its lease is judged by the age alone.
        let mut unsaid = full.clone();
        unsaid[Field::SnapTtl as usize] = None;
        assert_eq!(Snapshot::decode(&unsaid).unwrap().snap_ttl, None);
        // The operator's notice comes with it.
        let mut told = full.clone();
        told[23] = Some("Sizes S and M are sold out".into());
        assert_eq!(
            Snapshot::decode(&told).and_then(|s| s.notice).as_deref(),
            Some("Sizes S and M are sold out")
        );
        // With its texts per language, and without those it cannot show.
        told[Field::NoticeTexts as usize] = Some(r#"{"de":"S und M ausverkauft","xx":"?"}"#.into());
        assert_eq!(
            Snapshot::decode(&told).map(|s| s.notice_texts),
            Some(vec![("de".to_string(), "S und M ausverkauft".to_string())])
        );
        // A draw is read once seeded and signed for an opening.
        let mut drawn = full.clone();
        for (i, v) in [
            (15, "1000000"),
            (16, "1000010"),
            (17, "7,0,3"),
            (18, &"ab".repeat(32)),
            (19, "3"),
            (20, "12"),
        ] {
            drawn[i] = Some(v.to_string());
        }
        let read = Snapshot::decode(&drawn).unwrap();
        assert_eq!(read.sealed, 3);
        let d = read.draw.unwrap();
        assert_eq!((d.base, d.ahead), (1_000_000, 12));
        assert_eq!(d.rounds, [7, 0, 3]);
        for (i, unusable) in [(18, ""), (17, "7,0,4"), (17, "")] {
            let mut bad = drawn.clone();
            bad[i] = Some(unusable.to_string());
            assert_eq!(
                Snapshot::decode(&bad).unwrap().draw,
                None,
                "{i}: {unusable:?}"
            );
        }
        let mut before_a_tick = full.clone();
        before_a_tick[0] = None;
        assert_eq!(Snapshot::decode(&before_a_tick), None);
        assert_eq!(Snapshot::decode(&full[..5]), None);
        let mut marked = full.clone();
        marked[11] = Some("37801:37801,45362:45400,x:1".into());
        assert_eq!(
            Snapshot::decode(&marked).unwrap().marks,
            [(37_801, 37_801), (45_362, 45_400)]
        );
        // Marks moved on by the visitors gone from ahead of them since they
        // were written; one the shift passes is dropped.
        marked[11] = Some("120:120,37801:37801,45362:45400".into());
        marked[Field::MarksShift as usize] = Some("175".into());
        assert_eq!(
            Snapshot::decode(&marked).unwrap().marks,
            [(37_626, 37_801), (45_187, 45_400)]
        );
        marked[Field::MarksShift as usize] = Some("x".into());
        assert_eq!(Snapshot::decode(&marked).unwrap().marks.len(), 3);
    }

    fn drawn(left: u64) -> Snapshot {
        Snapshot {
            draw_left: left,
            opens_at: Some(NOW - 60_000),
            sealed: 4,
            draw: Some(SnapDraw {
                base: 2_000,
                rounds: vec![900_000, 0, 100_000],
                seed: DrawSeed::from_random([9; 32]),
                ahead: 1_500,
                dealt: false,
                moved: None,
            }),
            ..snapshot()
        }
    }

    #[test]
    fn a_slot_reads_its_place_from_the_draw() {
        let opens = 4;
        let perm = DrawPermutation::new(&[9; 32]);
        let rounds = [900_000, 0, 100_000];
        let slot = DrawSlot {
            round: 3,
            index: 41,
        };
        let place = perm.place(&rounds, 3, 41).unwrap();
        assert!(place >= 900_000, "round 3 comes after round 1");
        // The draw is over: the drawn ticket.
        assert_eq!(
            drawn(0).slot(opens, slot, NOW, 0.5),
            Some(SlotAnswer::Ticket(2_000 + place + 1))
        );
        // While it runs: behind the visitors ahead of the range.
        match drawn(5).slot(opens, slot, NOW, 0.5) {
            Some(SlotAnswer::State(UserState::Waiting {
                position,
                approximate: true,
                ..
            })) => assert_eq!(position, 1_500 + place + 1),
            other => panic!("{other:?}"),
        }
        // A draw whose groups' seats were dealt after the seal: a slot
        // may be another identity's now. Redis answers until the edge has
        // read which round-1 seats may have moved; then only those, and
        // every later round's, go to Redis.
        let mut dealt = drawn(0);
        dealt.draw.as_mut().unwrap().dealt = true;
        assert_eq!(dealt.slot(opens, slot, NOW, 0.5), None, "dealt, round 3");
        let first = DrawSlot { round: 1, index: 7 };
        let first_place = perm.place(&rounds, 1, 7).unwrap();
        assert_eq!(dealt.slot(opens, first, NOW, 0.5), None, "not read yet");
        let moved = |text: &str| Some(Arc::new(MovedSeats::parse(text, 900_000).unwrap()));
        dealt.draw.as_mut().unwrap().moved = moved("7,9,#3");
        assert_eq!(
            dealt.slot(opens, first, NOW, 0.5),
            None,
            "another draw's list"
        );
        dealt.draw.as_mut().unwrap().moved = moved("7,9,#4");
        assert_eq!(dealt.slot(opens, first, NOW, 0.5), None, "7 may have moved");
        dealt.draw.as_mut().unwrap().moved = moved("6,9,#4");
        assert_eq!(
            dealt.slot(opens, first, NOW, 0.5),
            Some(SlotAnswer::Ticket(2_000 + first_place + 1)),
            "7 is its first holder's"
        );
        assert_eq!(
            dealt.slot(opens, slot, NOW, 0.5),
            None,
            "round 3 still asks"
        );
        // A slot of another opening, outside the rounds, or under a stale
        // or closed snapshot goes to Redis.
        assert_eq!(
            drawn(0).slot(opens - 1, slot, NOW, 0.5),
            None,
            "an earlier draw"
        );
        assert_eq!(
            drawn(0).slot(opens, DrawSlot { round: 2, index: 0 }, NOW, 0.5),
            None
        );
        assert_eq!(
            drawn(0).slot(opens, slot, NOW + MAX_AGE_MS + 1_000, 0.5),
            None
        );
        let closed = Snapshot {
            state: QueueState::Closed,
            ..drawn(0)
        };
        assert_eq!(closed.slot(opens, slot, NOW, 0.5), None);
    }

    #[test]
    fn before_its_draw_a_slot_is_pre_queued() {
        let opens = NOW + 600_000;
        let s = Snapshot {
            opens_at: Some(opens),
            ..drawn(0)
        };
        let slot = DrawSlot { round: 1, index: 0 };
        // Draw 4 is the last sealed: this pre-queue will be number 5.
        assert_eq!(
            s.slot(5, slot, NOW, 0.0),
            Some(SlotAnswer::State(UserState::PreQueue {
                opens_at: opens,
                retry_after_ms: 30_000,
            }))
        );
        // Past the opening, not sealed yet: the spread window.
        let (now, spread) = (opens + 200, 0.5);
        let expected = s.pre_policy.retry_after_ms(opens, now, spread);
        let later = Snapshot {
            snap_at: opens,
            ..s.clone()
        };
        assert_eq!(
            later.slot(5, slot, now, spread),
            Some(SlotAnswer::State(UserState::PreQueue {
                opens_at: opens,
                retry_after_ms: expected,
            }))
        );
        assert_eq!(s.slot(6, slot, NOW, 0.0), None, "a later draw");
        let unscheduled = Snapshot {
            opens_at: None,
            ..s.clone()
        };
        assert_eq!(unscheduled.slot(5, slot, NOW, 0.0), None);
    }

    #[test]
    fn an_estimate_moves_on_by_the_admissions_since_the_snapshot() {
        let s = Snapshot {
            snap_at: NOW - 400,
            ..snapshot()
        };
        // 175/s over 400 ms: 70 admitted since.
        let (position, ..) = waiting(&s.far_back(500_000, NOW).unwrap());
        assert_eq!(position, 500_000 - 70);
        let paused = Snapshot {
            state: QueueState::Paused,
            ..s.clone()
        };
        let (position, ..) = waiting(&paused.far_back(500_000, NOW).unwrap());
        assert_eq!(position, 500_000, "nobody is admitted while paused");
    }

    fn with_head() -> Snapshot {
        Snapshot {
            head_front: 875,
            head_count: 875,
            marks: vec![(1_051, 1_100), (31_600, 31_600)],
            ..snapshot()
        }
    }

    #[test]
    fn near_polls_behind_the_head_are_estimates_until_liveness_is_due() {
        let s = with_head();
        let seen = NOW - 10_000;
        // Between the head and the first mark: 176 ranks over 225 tickets.
        let (position, eta, retry) = waiting(&s.near(1_000, seen, NOW).unwrap());
        assert_eq!(position, 875 + 98); // ⌈125 × 176 / 225⌉
        assert_eq!(eta, Some(6)); // 973 / 175 = 5.6
        assert_eq!(retry, 2_780); // eta / 2
                                  // Between the mark and the zone's front: dense.
        let (position, ..) = waiting(&s.near(20_000, seen, NOW).unwrap());
        assert_eq!(position, 1_051 + 18_931); // ⌈18,900 × 30,449 / 30,400⌉
                                              // Redis answers: in the head, once liveness is due (45 s), beyond
                                              // the zone (the far-back answer's part), without a head.
        assert!(s.near(875, seen, NOW).is_none(), "the head");
        assert!(s.near(1_000, NOW - 45_000, NOW).is_none(), "liveness");
        assert!(s.near(1_000, NOW - 44_999, NOW).is_some());
        assert!(s.near(31_800, seen, NOW).is_none(), "far back");
        // Within a second of admissions behind the zone's front: near.
        assert!(s.near(31_501, seen, NOW).is_some(), "reached");
        // Everyone behind the zone's front left: its last visitor is the
        // tail's.
        let shrunk = Snapshot {
            zone_front: 40,
            zone_count: 21,
            tail: 21,
            waiting: 21,
            head_front: 5,
            head_count: 5,
            marks: vec![(17, 17), (21, 21), (26, 26), (39, 39)],
            ..snapshot()
        };
        let (position, ..) = waiting(&shrunk.near(21, seen, NOW).unwrap());
        assert_eq!(position, 21);
        assert!(shrunk.near(22, seen, NOW).is_none(), "past the tail");
        assert!(snapshot().near(1_000, seen, NOW).is_none(), "no head");
        let stale = Snapshot {
            snap_at: NOW - MAX_AGE_MS - 1,
            ..with_head()
        };
        assert!(stale.near(1_000, seen, NOW).is_none());
        // 4 s old at 175/s: 700 admitted since, so ticket 1,000 (973 then)
        // is 273rd now, in the head of 875: Redis answers.
        let older = Snapshot {
            snap_at: NOW - 4_000,
            ..with_head()
        };
        assert!(older.near(1_000, seen, NOW).is_none(), "the head moved on");
        let (position, ..) = waiting(&older.near(20_000, seen, NOW).unwrap());
        assert_eq!(position, 19_982 - 700);
    }

    #[test]
    fn a_snapshot_is_trusted_only_while_its_writer_may_hold_the_lease() {
        let s = snapshot(); // written at NOW with a 2 s lease
                            // Read within the lease (and the clocks' tolerance): kept, and it
                            // answers for one refresh beyond.
        assert!(s.has_live_writer(NOW + 3_000));
        assert!(s.is_fresh(NOW + 2_000 + CLOCK_TOLERANCE_MS + REFRESH_MS));
        assert!(!s.is_fresh(NOW + 2_000 + CLOCK_TOLERANCE_MS + REFRESH_MS + 1));
        // Read later: its writer has stopped ticking and lost the lease.
        assert!(!s.has_live_writer(NOW + 3_001));
        let probe = s.far_back(500_000, NOW + 2_000 + CLOCK_TOLERANCE_MS + REFRESH_MS + 1);
        assert!(probe.is_none(), "stale by the lease");
        // An idle holder's longer lease lets its snapshot be read later;
        // MAX_AGE_MS caps every lease.
        let idle = Snapshot {
            snap_ttl: Some(7_000),
            ..snapshot()
        };
        assert!(idle.has_live_writer(NOW + 8_000));
        assert!(idle.is_fresh(NOW + MAX_AGE_MS));
        assert!(!idle.is_fresh(NOW + MAX_AGE_MS + 1));
        // A scheduler that does not say: the age alone, as before.
        let unsaid = Snapshot {
            snap_ttl: None,
            ..snapshot()
        };
        assert!(unsaid.has_live_writer(NOW + MAX_AGE_MS));
        assert!(!unsaid.has_live_writer(NOW + MAX_AGE_MS + 1));
        // An edge clock behind Redis' within the tolerance is no reason to
        // distrust it.
        assert!(s.has_live_writer(NOW - 500));
        // Marked without a live writer when read: it answers nothing.
        let dead = Snapshot {
            live_writer: false,
            ..snapshot()
        };
        assert!(!dead.is_fresh(NOW));
        assert!(dead.far_back(500_000, NOW).is_none());
    }
}
