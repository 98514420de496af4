//! Whether a poll is answered at the edge from the isolate's snapshot or
//! by Redis (the position script), decided from the visitor's place cookie
//! alone: pure, so the worker only reads the cookie and the snapshot.

use super::{SlotAnswer, Snapshot};
use crate::draw::DrawSlot;
use crate::state::UserState;

/// What a visitor's place cookie holds, once the edge checked its
/// signature (`queuegate_edge::place` reads and signs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A ticket in line, and when the visitor last asked Redis (epoch ms,
    /// to the second).
    Ticket {
        /// The ticket.
        ticket: u64,
        /// The visitor's last Redis request.
        seen_ms: u64,
    },
    /// A slot in draw number `draw`.
    Slot {
        /// The draw's number.
        draw: u64,
        /// The slot.
        slot: DrawSlot,
    },
}

/// A poll answered at the edge.
#[derive(Debug, Clone, PartialEq)]
pub enum EdgeAnswer {
    /// Answer with this state; the place cookie stays as it is.
    State(UserState),
    /// The draw is over and placed the visitor on `ticket`: answer with
    /// `state`, and sign the ticket into the place cookie with seen 0 (it
    /// never asked Redis with this ticket, so near the head it does at
    /// once).
    Drawn {
        /// The far-back answer for the ticket.
        state: UserState,
        /// The drawn ticket.
        ticket: u64,
    },
}

impl Snapshot {
    /// The last ticket this snapshot sends to Redis for good: the exact
    /// head's front (the near zone's without a head). Both only move
    /// forward, so a poll at or before it needs no snapshot at all.
    pub fn exact_front(&self) -> u64 {
        if self.head_count > 0 {
            self.head_front
        } else {
            self.zone_front
        }
    }
}

/// Whether a poll from a visitor holding `held` may be answered from a
/// snapshot at all, before one is read; `exact_front` is the last
/// snapshot's (None: none held). A ticket in the exact head is exact for
/// good, so no snapshot is read (or refreshed) to answer it.
pub fn reads_snapshot(held: &Held, exact_front: Option<u64>) -> bool {
    match held {
        Held::Ticket { ticket, .. } => exact_front.is_none_or(|front| *ticket > front),
        Held::Slot { .. } => true,
    }
}

/// The edge's answer to a poll from a visitor holding `held`, under
/// `snapshot` at `now_ms`; `spread` in `[0, 1)` is the reply's random draw
/// for the opening's spread window (read only for a slot). `None` sends
/// the poll to Redis.
///
/// A ticket behind the near zone gets [`Snapshot::far_back`]; one in the
/// near zone behind the exact head gets [`Snapshot::near`], while its last
/// Redis request is recent (it must prove it is alive). A slot gets
/// [`Snapshot::slot`]; once the draw is over, its drawn ticket is answered
/// only far back (near the head, Redis learns the ticket first).
///
/// A kept stock (docs/drop-day.md, *Stock*): sold out, a waiting or
/// pre-queued visitor is told so (and keeps its place) within the
/// snapshot's age.
pub fn answer(snapshot: &Snapshot, held: Held, now_ms: u64, spread: f64) -> Option<EdgeAnswer> {
    let answer = match held {
        Held::Ticket { ticket, seen_ms } => snapshot
            .far_back(ticket, now_ms)
            .or_else(|| snapshot.near(ticket, seen_ms, now_ms))
            .map(EdgeAnswer::State),
        Held::Slot { draw, slot } => match snapshot.slot(draw, slot, now_ms, spread)? {
            SlotAnswer::State(state) => Some(EdgeAnswer::State(state)),
            SlotAnswer::Ticket(ticket) => snapshot
                .far_back(ticket, now_ms)
                .map(|state| EdgeAnswer::Drawn { state, ticket }),
        },
    }?;
    Some(match answer {
        EdgeAnswer::State(state) => EdgeAnswer::State(snapshot.told_of_stock(state)),
        EdgeAnswer::Drawn { state, ticket } => EdgeAnswer::Drawn {
            state: snapshot.told_of_stock(state),
            ticket,
        },
    })
}

impl Snapshot {
    /// `state` as a sold-out stock says it: a waiting or pre-queued
    /// visitor keeps its place and is told `sold_out`, polling when its
    /// answer said (far back that is `poll_max_ms` or near it; near the
    /// head it must still reach Redis in time to stay alive, as `near`
    /// checked for that interval). An exact reply, from Redis, polls at
    /// the paused line's `poll_max_ms`.
    pub fn told_of_stock(&self, state: UserState) -> UserState {
        if !self.stock.is_some_and(|s| s.sold_out()) {
            return state;
        }
        match state {
            UserState::Waiting { retry_after_ms, .. }
            | UserState::PreQueue { retry_after_ms, .. } => UserState::SoldOut { retry_after_ms },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::DrawPermutation;
    use crate::ops::DrawSeed;
    use crate::settings::QueueState;
    use crate::snapshot::{SnapDraw, MAX_AGE_MS};

    use crate::snapshot::tests::{snapshot, NOW};

    /// A line of 1,000,000, its near zone 31,500 long with an exact head
    /// of 875, admitting 175 a second.
    fn line() -> Snapshot {
        Snapshot {
            head_front: 875,
            head_count: 875,
            ..snapshot()
        }
    }

    /// `line()` after draw number 4, `left` visitors still to place.
    fn drawn(left: u64) -> Snapshot {
        Snapshot {
            draw_left: left,
            sealed: 4,
            draw: Some(SnapDraw {
                base: 40_000,
                rounds: vec![900_000],
                seed: DrawSeed::from_random([9; 32]),
                ahead: 1_500,
                dealt: false,
                moved: None,
            }),
            ..line()
        }
    }

    fn ticket(ticket: u64, seen_ms: u64) -> Held {
        Held::Ticket { ticket, seen_ms }
    }

    fn position(answer: Option<EdgeAnswer>) -> u64 {
        match answer {
            Some(EdgeAnswer::State(UserState::Waiting {
                position,
                approximate: true,
                ..
            })) => position,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_exact_head_reads_no_snapshot() {
        let front = line().exact_front();
        assert_eq!(front, 875, "the head's front");
        let no_head = Snapshot {
            head_count: 0,
            ..line()
        };
        assert_eq!(no_head.exact_front(), 31_500, "the zone's without a head");
        assert!(!reads_snapshot(&ticket(875, NOW), Some(front)));
        assert!(reads_snapshot(&ticket(876, NOW), Some(front)));
        assert!(reads_snapshot(&ticket(1, NOW), None), "none held yet");
        let slot = Held::Slot {
            draw: 1,
            slot: DrawSlot { round: 1, index: 0 },
        };
        assert!(reads_snapshot(&slot, Some(u64::MAX)));
    }

    #[test]
    fn far_back_and_near_tickets_are_answered_at_the_edge() {
        let s = line();
        assert_eq!(position(answer(&s, ticket(500_000, 0), NOW, 0.0)), 500_000);
        // Near, seen 10 s ago: an estimate behind the head.
        let near = position(answer(&s, ticket(1_000, NOW - 10_000), NOW, 0.0));
        assert_eq!(near, 1_000);
        // Near, but its liveness is due: Redis must see it.
        assert_eq!(answer(&s, ticket(1_000, NOW - 45_000), NOW, 0.0), None);
        // Far back never needs liveness.
        assert!(answer(&s, ticket(500_000, 0), NOW, 0.0).is_some());
        // The head, past the tail, a stale or closed snapshot: Redis.
        assert_eq!(answer(&s, ticket(875, NOW), NOW, 0.0), None);
        assert_eq!(answer(&s, ticket(1_000_001, NOW), NOW, 0.0), None);
        let late = NOW + MAX_AGE_MS + 1;
        assert_eq!(answer(&s, ticket(500_000, late), late, 0.0), None);
        let closed = Snapshot {
            state: QueueState::Closed,
            ..line()
        };
        assert_eq!(answer(&closed, ticket(500_000, NOW), NOW, 0.0), None);
    }

    #[test]
    fn a_slot_is_answered_from_the_draw_and_its_ticket_signed_once_over() {
        let slot = DrawSlot { round: 1, index: 7 };
        let held = Held::Slot { draw: 4, slot };
        let place = DrawPermutation::new(&[9; 32])
            .place(&[900_000], 1, 7)
            .unwrap();
        // While the draw runs: behind the visitors ahead of its range.
        assert_eq!(
            position(answer(&drawn(5), held, NOW, 0.5)),
            1_500 + place + 1
        );
        // Over: the drawn ticket, answered far back and signed.
        let ticket = 40_000 + place + 1;
        match answer(&drawn(0), held, NOW, 0.5) {
            Some(EdgeAnswer::Drawn { state, ticket: t }) => {
                assert_eq!(t, ticket);
                assert_eq!(
                    Some(state),
                    drawn(0).far_back(ticket, NOW),
                    "the far-back answer"
                );
            }
            other => panic!("{other:?}"),
        }
        // A drawn ticket near the head asks Redis (which learns it first).
        let near_head = Snapshot {
            zone_front: 2_000_000,
            zone_count: 999_000,
            ..drawn(0)
        };
        assert_eq!(answer(&near_head, held, NOW, 0.5), None);
        // Another draw's slot: Redis.
        let other = Held::Slot { draw: 3, slot };
        assert_eq!(answer(&drawn(0), other, NOW, 0.5), None);
    }

    #[test]
    fn a_slot_before_its_draw_is_pre_queued_with_the_spread_given() {
        let opens = NOW - 1_000;
        let s = Snapshot {
            opens_at: Some(opens),
            ..drawn(0)
        };
        let held = Held::Slot {
            draw: 5,
            slot: DrawSlot { round: 1, index: 0 },
        };
        for spread in [0.0, 0.5, 0.99] {
            assert_eq!(
                answer(&s, held, NOW, spread),
                Some(EdgeAnswer::State(UserState::PreQueue {
                    opens_at: opens,
                    retry_after_ms: s.pre_policy.retry_after_ms(opens, NOW, spread),
                }))
            );
        }
    }

    #[test]
    fn a_sold_out_stock_tells_far_and_near_visitors_and_keeps_their_polls() {
        let kept = |left: u64, out: u64| Snapshot {
            stock: Some(crate::chance::StockView {
                left,
                out,
                conversion: None,
                units_per_order: None,
            }),
            ..line()
        };
        let far = Held::Ticket {
            ticket: 500_000,
            seen_ms: NOW,
        };
        let waiting = answer(&line(), far, NOW, 0.0).unwrap();
        let EdgeAnswer::State(UserState::Waiting { retry_after_ms, .. }) = waiting else {
            panic!("{waiting:?}");
        };
        assert_eq!(
            answer(&kept(0, 0), far, NOW, 0.0),
            Some(EdgeAnswer::State(UserState::SoldOut { retry_after_ms }))
        );
        // Near the head too, at its own interval (its liveness).
        let near = Held::Ticket {
            ticket: 2_000,
            seen_ms: NOW,
        };
        let Some(EdgeAnswer::State(UserState::Waiting { retry_after_ms, .. })) =
            answer(&line(), near, NOW, 0.0)
        else {
            panic!("a near answer");
        };
        assert_eq!(
            answer(&kept(0, 5), near, NOW, 0.0),
            Some(EdgeAnswer::State(UserState::SoldOut { retry_after_ms }))
        );
        // Plenty left: answered as before.
        assert_eq!(answer(&kept(1_000, 10), far, NOW, 0.0), Some(waiting));
    }
}
