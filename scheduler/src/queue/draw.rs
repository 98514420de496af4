//! The pre-queue in the tick: `draw_open` seals it once its opening has
//! passed; a running draw is then placed batch by batch ([`Placement`]) for
//! at most a quarter of the lease per tick (the admit that follows renews
//! the lease, and admits nobody until the draw is over).

use std::time::{Duration, Instant};

use queuegate_shared::ops::{
    AdmitCounts, DrawOpen, DrawState, Drawing, FreshCommit, Placed, Sealed,
};
use queuegate_shared::{QueueKeys, Settings};

use super::TickError;
use crate::connect::RedisConn;
use crate::draw::{fresh_commit, Placement};
use crate::engine;
use crate::metrics::Metrics;
use crate::reveal::{Reveal, Revealed};

/// Whether to look at the pre-queue, and the draw being placed.
#[derive(Debug)]
pub(super) struct Drawer {
    /// The last tick saw a pre-queue or a running draw (or the lease is
    /// new): look at it this tick. Otherwise the tick is one admit call.
    due: bool,
    /// The running draw and its permutation (computed once per draw).
    placement: Option<Placement>,
    /// A sealed draw's record being written before its seed is revealed.
    reveal: Option<Reveal>,
}

impl Drawer {
    /// Due: a new holder looks at the pre-queue on its first tick.
    pub(super) fn new() -> Self {
        Drawer {
            due: true,
            placement: None,
            reveal: None,
        }
    }

    /// Whether this tick looks at the pre-queue.
    pub(super) fn is_due(&self) -> bool {
        self.due
    }

    /// A new lease: look at the pre-queue on the next tick.
    pub(super) fn restart(&mut self) {
        self.due = true;
    }

    /// What a tick's admit saw: look again only while there is a pre-queue
    /// or a draw runs.
    pub(super) fn saw(&mut self, counts: &AdmitCounts) {
        self.due = counts.pre_queued > 0 || counts.drawing;
    }

    /// Seals a pre-queue whose opening passed, then places the running draw
    /// for at most a quarter of the lease from `started`.
    pub(super) async fn draw(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        owner: &str,
        settings: &Settings,
        metrics: &Metrics,
        started: Instant,
    ) -> Result<(), TickError> {
        let queue = keys.queue().as_str();
        let commit = fresh_commit().map_err(TickError::Random)?;
        let state = engine::run(
            conn,
            &DrawOpen {
                keys,
                owner,
                seed: None,
                commit: Some(&commit),
            },
        )
        .await?;
        let budget = Duration::from_millis(settings.lease_ttl_ms) / 4;
        let drawing = match state {
            // Not the holder any more: the admit that follows finds out.
            DrawState::NotOwner => return Ok(()),
            DrawState::Idle {
                pre_queued,
                committed,
            } => {
                if committed {
                    audit_commit(queue, &commit, false);
                }
                self.placement = None;
                self.reveal = None;
                metrics.draw(queue, pre_queued, 0);
                return Ok(());
            }
            DrawState::Sealed(sealed) => {
                if sealed.committed {
                    audit_commit(queue, &commit, true);
                }
                metrics.draw(queue, 0, sealed.end - sealed.base);
                return self
                    .reveal(conn, keys, owner, sealed, started, budget)
                    .await;
            }
            DrawState::Drawing(d) => d,
        };
        self.reveal = None;
        if drawing.done == 0 {
            tracing::info!(
                queue,
                visitors = drawing.size(),
                "opening: drawing the pre-queue's places"
            );
        }
        let placement = self.placement(drawing);
        loop {
            match placement
                .step(conn, keys, owner, settings.draw_batch)
                .await?
            {
                Placed::NotOwner | Placed::Moved { .. } => return Ok(()),
                Placed::Batch {
                    placed,
                    dropped,
                    left,
                } => {
                    metrics.draw(queue, 0, left);
                    metrics.drawn(queue, placed, dropped);
                    if left == 0 {
                        tracing::info!(
                            queue,
                            visitors = placement.drawing().size(),
                            "the pre-queue is placed in line"
                        );
                        self.placement = None;
                        return Ok(());
                    }
                }
            }
            if started.elapsed() >= budget {
                return Ok(());
            }
        }
    }

    /// Writes `sealed`'s record page by page for at most `budget` from
    /// `started`, and reveals its seed after the last page.
    async fn reveal(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        owner: &str,
        sealed: Sealed,
        started: Instant,
        budget: Duration,
    ) -> Result<(), TickError> {
        let queue = keys.queue().as_str();
        if self.reveal.as_ref().map(Reveal::sealed) != Some(&sealed) {
            tracing::info!(
                target: crate::audit::TARGET,
                who = "scheduler",
                action = "draw_sealed",
                queue,
                draw = sealed.number,
                registrants = sealed.end - sealed.base,
                "the pre-queue is sealed: writing its record before revealing the seed"
            );
            self.reveal = Some(Reveal::new(sealed));
        }
        let Some(reveal) = self.reveal.as_mut() else {
            return Ok(());
        };
        loop {
            match reveal.step(conn, keys, owner).await? {
                Revealed::Page => {}
                Revealed::Moved => {
                    self.reveal = None;
                    return Ok(());
                }
                Revealed::Waiting(attempts, why) => {
                    // Every failed read is retried on the next tick; the log
                    // says so on the first and every 10th.
                    if attempts == 1 || attempts % 10 == 0 {
                        tracing::warn!(
                            queue,
                            draw = reveal.sealed().number,
                            attempts,
                            "the draw waits for its beacon round's value before its seed is revealed: {why}"
                        );
                    }
                    return Ok(());
                }
                Revealed::Done(record) => {
                    tracing::info!(
                        target: crate::audit::TARGET,
                        who = "scheduler",
                        action = "draw_revealed",
                        queue,
                        draw = record.draw,
                        registrants = record.registrants,
                        root = record.root.as_str(),
                        commitment = record.commitment.as_str(),
                        seed = record.seed.as_str(),
                        beacon = record.beacon.as_ref().map(|b| format!("{} round {}", b.source, b.round)),
                        "the draw's record is fixed and its seed revealed"
                    );
                    self.reveal = None;
                    return Ok(());
                }
            }
            if started.elapsed() >= budget {
                return Ok(());
            }
        }
    }

    /// The placement of `drawing`: the one kept from earlier ticks while
    /// it is the same draw (seed and size), so the permutation is computed
    /// once per draw; a new one otherwise.
    fn placement(&mut self, drawing: Drawing) -> &mut Placement {
        if !self.placement.as_mut().is_some_and(|p| p.resume(&drawing)) {
            self.placement = None;
        }
        self.placement
            .get_or_insert_with(|| Placement::new(drawing))
    }
}

/// The audit line of a commitment `draw_open` kept (never the seed).
fn audit_commit(queue: &str, commit: &FreshCommit, late: bool) {
    let commitment = hex::encode(queuegate_shared::draw_proof::commitment(&commit.seed));
    tracing::info!(
        target: crate::audit::TARGET,
        who = "scheduler",
        action = "draw_committed",
        queue,
        commitment = commitment.as_str(),
        late,
        "the next draw's seed is committed"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::ops::DrawSeed;

    fn drawing(seed: u8, size: u64, done: u64) -> Drawing {
        Drawing {
            base: 10,
            end: 10 + size,
            done,
            seed: DrawSeed::from_random([seed; 32]),
            rounds: vec![size],
            deal_pending: false,
        }
    }

    #[test]
    fn the_pre_queue_is_looked_at_while_there_is_one_and_after_a_new_lease() {
        let mut d = Drawer::new();
        assert!(d.is_due(), "a new holder looks");
        d.saw(&AdmitCounts::default());
        assert!(!d.is_due(), "nothing pre-queued, no draw: one admit a tick");
        d.saw(&AdmitCounts {
            pre_queued: 3,
            ..AdmitCounts::default()
        });
        assert!(d.is_due());
        d.saw(&AdmitCounts {
            drawing: true,
            ..AdmitCounts::default()
        });
        assert!(d.is_due());
        d.saw(&AdmitCounts::default());
        d.restart();
        assert!(d.is_due());
    }

    #[test]
    fn the_placement_follows_the_draw_draw_open_reports() {
        let mut d = Drawer::new();
        assert_eq!(d.placement(drawing(1, 30, 0)).drawing().done, 0);
        // The same draw on a later tick, its cursor moved.
        assert_eq!(
            d.placement(drawing(1, 30, 12)).drawing(),
            &drawing(1, 30, 12)
        );
        // Another draw (a later opening): its own seed and size.
        assert_eq!(d.placement(drawing(2, 40, 0)).drawing(), &drawing(2, 40, 0));
        assert_eq!(d.placement(drawing(2, 41, 5)).drawing(), &drawing(2, 41, 5));
    }
}
