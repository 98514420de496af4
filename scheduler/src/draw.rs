//! The pre-queue's draw (docs/drop-day.md): each sealed visitor's place
//! comes from the keyed permutation in `queuegate_shared::draw`, from a
//! seed the OS CSPRNG made and Redis keeps, so a scheduler that takes over
//! a running draw computes the same places, and the edge tells a visitor
//! its place from the same function without asking Redis
//! (docs/uncapped-line.md); and [`Placement`], the one batch loop that
//! places it (the scheduler, the system tests and the bench all drive
//! this one).

use queuegate_shared::draw::{deal, slot_of_rank, DrawPermutation, Member};
use queuegate_shared::ops::{
    Dealt, DrawPlace, DrawSeed, DrawShuffle, Drawing, FreshCommit, Placed,
};
use queuegate_shared::QueueKeys;
use redis::aio::ConnectionLike;

use crate::engine::{self, EngineError};

/// A fresh seed from the OS CSPRNG.
pub fn fresh_seed() -> Result<DrawSeed, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(DrawSeed::from_random(bytes))
}

/// A fresh secret seed and salt key for the next draw's commitment.
pub fn fresh_commit() -> Result<FreshCommit, getrandom::Error> {
    let mut bytes = [0u8; 64];
    getrandom::getrandom(&mut bytes)?;
    let (seed, salt_key) = bytes.split_at(32);
    // Two halves of 64 bytes are 32 bytes each: these cannot fail.
    #[allow(clippy::expect_used)]
    Ok(FreshCommit {
        seed: seed.try_into().expect("32 bytes"),
        salt_key: salt_key.try_into().expect("32 bytes"),
    })
}

/// A running draw as its lease holder places it: the draw `draw_open`
/// reported and its permutation, one `draw_place` batch per
/// [`step`](Placement::step). The scheduler steps it within a time budget
/// each tick; the system tests step it batch by batch; the bench times
/// each step. The places of a batch are computed when it is placed (a few
/// HMACs each), so a draw of millions costs no pause up front.
#[derive(Debug, Clone)]
pub struct Placement {
    drawing: Drawing,
    permutation: DrawPermutation,
    placed: u64,
    dropped: u64,
    /// The deal of the seats of address groups with more than one
    /// identity, while it is pending: each step reads one page of
    /// `draw_members` or writes one batch of the deal.
    deal: Deal,
}

/// Where the deal stands (see [`queuegate_shared::draw::deal`]).
#[derive(Debug, Clone)]
enum Deal {
    /// Reading `draw_members` from this HSCAN cursor.
    Reading { cursor: u64, members: Vec<Member> },
    /// Writing the new scores from this index on.
    Writing {
        scores: Vec<(String, u64)>,
        at: usize,
    },
}

/// `draw_members` entries read per HSCAN page.
const DEAL_PAGE: u64 = 1_000;

impl Placement {
    /// The placement of `drawing`, from its cursor on.
    pub fn new(drawing: Drawing) -> Self {
        let permutation = DrawPermutation::new(&drawing.seed.bytes());
        Placement {
            drawing,
            permutation,
            placed: 0,
            dropped: 0,
            deal: Deal::Reading {
                cursor: 0,
                members: Vec::new(),
            },
        }
    }

    /// The draw, its cursor (`done`) following the batches placed.
    pub fn drawing(&self) -> &Drawing {
        &self.drawing
    }

    /// Visitors this placement put in line so far.
    pub fn placed(&self) -> u64 {
        self.placed
    }

    /// Pre-queued visitors dropped at placement so far (none since nobody
    /// leaves a pre-queue for silence; kept for the reply's shape).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Carries on with `drawing` as `draw_open` reports it now (its cursor
    /// may have moved: another holder placed batches meanwhile). False,
    /// and nothing changed, when `drawing` is another draw (another seed,
    /// size or rounds): it needs its own placement.
    pub fn resume(&mut self, drawing: &Drawing) -> bool {
        if drawing.seed != self.drawing.seed
            || drawing.size() != self.drawing.size()
            || drawing.rounds != self.drawing.rounds
        {
            return false;
        }
        // A deal that another holder finished meanwhile, or that must start
        // again (this one's writes may have lost the lease), follows Redis.
        if drawing.deal_pending && !self.drawing.deal_pending {
            self.deal = Deal::Reading {
                cursor: 0,
                members: Vec::new(),
            };
        }
        self.drawing = drawing.clone();
        true
    }

    /// The 0-based places, within the reserved range, of the visitors at
    /// ranks `from..to` of the sealed pre-queue.
    pub fn places(&self, from: u64, to: u64) -> Vec<u64> {
        let rounds = &self.drawing.rounds;
        (from..to)
            .map(|rank| {
                let (round, index) =
                    slot_of_rank(rounds, rank).expect("ranks stay within the draw's size");
                self.permutation
                    .place(rounds, round, index)
                    .expect("a rank's slot lies within its round")
            })
            .collect()
    }

    /// Places the next `batch` visitors (fewer at the end) as `owner` with
    /// one `draw_place` call. A placed batch moves the cursor; `NotOwner`
    /// and `Moved` change nothing, here or in Redis (the next `draw_open`
    /// tells where the draw stands). `Placed::Batch { left: 0, .. }`: the
    /// draw is over.
    pub async fn step<C>(
        &mut self,
        conn: &mut C,
        keys: &QueueKeys,
        owner: &str,
        batch: u64,
    ) -> Result<Placed, EngineError>
    where
        C: ConnectionLike + Send,
    {
        if self.drawing.deal_pending {
            return self.deal_step(conn, keys, owner, batch).await;
        }
        let d = &self.drawing;
        let end = (d.done + batch).min(d.size());
        let places = self.places(d.done, end);
        let reply = engine::run(
            conn,
            &DrawPlace {
                keys,
                owner,
                draw: d,
                places: &places,
            },
        )
        .await?;
        if let Placed::Batch {
            placed, dropped, ..
        } = reply
        {
            self.placed += placed;
            self.dropped += dropped;
            self.drawing.done = end;
        }
        Ok(reply)
    }
}

impl Placement {
    /// One step of the deal, before anyone is placed: one page of
    /// `draw_members` read, or one batch of at most `batch` new scores
    /// written (the last batch ends the dealing). Reported as a batch that
    /// placed nobody, so every driver steps through it like the draw.
    async fn deal_step<C>(
        &mut self,
        conn: &mut C,
        keys: &QueueKeys,
        owner: &str,
        batch: u64,
    ) -> Result<Placed, EngineError>
    where
        C: ConnectionLike + Send,
    {
        let left = self.drawing.size();
        let waiting = Placed::Batch {
            placed: 0,
            dropped: 0,
            left,
        };
        match &mut self.deal {
            Deal::Reading { cursor, members } => {
                let (next, page): (u64, Vec<(String, String)>) = redis::cmd("HSCAN")
                    .arg(keys.draw_members())
                    .arg(*cursor)
                    .arg("COUNT")
                    .arg(DEAL_PAGE)
                    .query_async(conn)
                    .await
                    .map_err(EngineError::Redis)?;
                for (user, value) in page {
                    // An entry that does not parse is not dealt: that
                    // identity keeps the seat it took.
                    if let Some(m) = Member::parse(&user, &value) {
                        members.push(m);
                    }
                }
                *cursor = next;
                if next == 0 {
                    let scores = deal(&self.drawing.seed.bytes(), members);
                    self.deal = Deal::Writing { scores, at: 0 };
                }
                Ok(waiting)
            }
            Deal::Writing { scores, at } => {
                let end = (*at + batch.max(1) as usize).min(scores.len());
                let reply = engine::run(
                    conn,
                    &DrawShuffle {
                        keys,
                        owner,
                        seed: &self.drawing.seed,
                        scores: &scores[*at..end],
                        last: end == scores.len(),
                    },
                )
                .await?;
                match reply {
                    Dealt::NotOwner => Ok(Placed::NotOwner),
                    Dealt::Moved => Ok(Placed::Moved {
                        done: self.drawing.done,
                    }),
                    Dealt::Written(_) => {
                        *at = end;
                        if end == scores.len() {
                            self.drawing.deal_pending = false;
                        }
                        Ok(waiting)
                    }
                }
            }
        }
    }
}

/// `order[rank]` is the 0-based place, within the reserved tickets, of the
/// `rank`-th sealed visitor of a draw in `rounds` (ranked by round, then by
/// arrival within it): each round is drawn on its own block of places,
/// right after the round before it, in an order the seed fixes.
pub fn permutation_in_rounds(seed: &DrawSeed, rounds: &[u64]) -> Vec<u64> {
    let size = rounds.iter().sum();
    Placement::new(Drawing {
        base: 0,
        end: size,
        done: 0,
        seed: seed.clone(),
        rounds: rounds.to_vec(),
        deal_pending: false,
    })
    .places(0, size)
}

/// [`permutation_in_rounds`] for a draw of one round.
pub fn permutation(seed: &DrawSeed, size: u64) -> Vec<u64> {
    permutation_in_rounds(seed, &[size])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permutation_fixed_by_its_seed() {
        let a = DrawSeed::from_random([7; 32]);
        let p = permutation(&a, 1_000);
        let mut sorted = p.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1_000).collect::<Vec<_>>());
        assert_eq!(p, permutation(&a, 1_000), "same seed, same draw");
        assert_ne!(p, permutation(&DrawSeed::from_random([8; 32]), 1_000));
        assert_ne!(p, sorted, "shuffled");
        assert!(permutation(&a, 0).is_empty());
        assert_ne!(fresh_seed().unwrap(), fresh_seed().unwrap());
    }

    fn drawing(seed: u8, base: u64, size: u64, done: u64) -> Drawing {
        Drawing {
            base,
            end: base + size,
            done,
            seed: DrawSeed::from_random([seed; 32]),
            rounds: vec![size],
            deal_pending: false,
        }
    }

    #[test]
    fn a_placement_resumes_its_own_draw_only() {
        let mut p = Placement::new(drawing(1, 100, 50, 0));
        let order = p.places(0, 50);
        assert_eq!(order, permutation(&DrawSeed::from_random([1; 32]), 50));
        assert_eq!((p.placed(), p.dropped()), (0, 0));
        // The same draw, its cursor moved by another holder: carry on.
        assert!(p.resume(&drawing(1, 100, 50, 20)));
        assert_eq!(p.drawing().done, 20);
        assert_eq!(p.places(20, 50), order[20..], "the same places");
        // Another seed, or another size: not this placement's draw.
        let in_rounds = Drawing {
            rounds: vec![30, 20],
            deal_pending: false,
            ..drawing(1, 100, 50, 20)
        };
        for other in [drawing(2, 100, 50, 20), drawing(1, 100, 51, 20), in_rounds] {
            assert!(!p.resume(&other), "{other:?}");
            assert_eq!(p.drawing(), &drawing(1, 100, 50, 20), "unchanged");
        }
    }

    /// The scheduler places with the shared function the edge evaluates
    /// (its vectors are pinned in `queuegate_shared::draw`).
    #[test]
    fn the_permutation_of_a_seed_is_pinned() {
        let seed = DrawSeed::from_random(std::array::from_fn(|i| i as u8));
        assert_eq!(
            permutation(&seed, 20),
            [5, 19, 1, 10, 8, 4, 11, 16, 9, 13, 15, 2, 12, 3, 14, 7, 18, 6, 0, 17]
        );
    }

    /// Rounds keep their blocks: every place of round `k` comes before
    /// every place of round `k + 1`, and within its block a round is a
    /// permutation; an empty round takes no place. The first round is
    /// drawn like a draw of that size alone.
    #[test]
    fn rounds_are_drawn_block_by_block() {
        let seed = DrawSeed::from_random(std::array::from_fn(|i| i as u8));
        let rounds = [7, 1, 0, 4, 3];
        let order = permutation_in_rounds(&seed, &rounds);
        let mut start = 0u64;
        for &n in &rounds {
            let block = &order[start as usize..(start + n) as usize];
            let mut sorted = block.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, (start..start + n).collect::<Vec<_>>());
            start += n;
        }
        assert_eq!(order[..7], permutation(&seed, 7)[..]);
        assert_eq!(permutation_in_rounds(&seed, &[20]), permutation(&seed, 20));
        assert!(permutation_in_rounds(&seed, &[]).is_empty());
    }
}
