//! The pre-queue's draw (docs/drop-day.md): each sealed visitor's place
//! comes from the keyed permutation in `queuegate_shared::draw`, from a
//! seed the OS CSPRNG made and Redis keeps, so a scheduler that takes over
//! a running draw computes the same places, and the edge tells a visitor
//! its place from the same function without asking Redis
//! (docs/uncapped-line.md); and [`Placement`], the one batch loop that
//! places it (the scheduler, the system tests and the bench all drive
//! this one).

use queuegate_shared::draw::{slot_of_rank, DrawPermutation};
use queuegate_shared::ops::{DrawPlace, DrawSeed, Drawing, Placed};
use queuegate_shared::QueueKeys;
use redis::aio::ConnectionLike;

use crate::engine::{self, EngineError};

/// A fresh seed from the OS CSPRNG.
pub fn fresh_seed() -> Result<DrawSeed, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(DrawSeed::from_random(bytes))
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
}

impl Placement {
    /// The placement of `drawing`, from its cursor on.
    pub fn new(drawing: Drawing) -> Self {
        let permutation = DrawPermutation::new(&drawing.seed.bytes());
        Placement {
            drawing,
            permutation,
            placed: 0,
            dropped: 0,
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
