//! The pre-queue's draw (docs/drop-day.md): the permutation that gives each
//! sealed visitor a place, from a seed the OS CSPRNG made and Redis keeps,
//! so a scheduler that takes over a running draw computes the same one; and
//! [`Placement`], the one batch loop that places it (the scheduler, the
//! system tests and the bench all drive this one).

use queuegate_shared::ops::{DrawPlace, DrawSeed, Drawing, Placed};
use queuegate_shared::QueueKeys;
use rand_chacha::rand_core::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
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
/// each step.
#[derive(Debug, Clone)]
pub struct Placement {
    drawing: Drawing,
    order: Vec<u64>,
    placed: u64,
    dropped: u64,
}

impl Placement {
    /// The placement of `drawing`, from its cursor on. Computes the
    /// permutation: keep the placement for the whole draw (see
    /// [`resume`](Placement::resume)) rather than making one per tick.
    pub fn new(drawing: Drawing) -> Self {
        let order = permutation_in_rounds(&drawing.seed, &drawing.rounds);
        Placement {
            drawing,
            order,
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

    /// Pre-queued visitors who had stopped polling, dropped so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Carries on with `drawing` as `draw_open` reports it now (its cursor
    /// may have moved: another holder placed batches meanwhile), keeping
    /// the permutation. False, and nothing changed, when `drawing` is
    /// another draw (another seed, size or rounds): it needs its own
    /// placement.
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
        let reply = engine::run(
            conn,
            &DrawPlace {
                keys,
                owner,
                draw: d,
                places: &self.order[to_index(d.done)..to_index(end)],
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
/// `rank`-th sealed visitor (by arrival): a uniformly random permutation,
/// the same for the same seed and size.
///
/// Our own Fisher–Yates rather than a library shuffle: every scheduler that
/// holds the lease during one draw must compute the same order, so no
/// dependency upgrade may change it (the golden-vector test pins it). The
/// words are ChaCha20's keystream (key = seed, nonce and counter 0) read as
/// little-endian u64s; from the last position down, position `i` swaps with
/// a uniform one of `0..=i`.
pub fn permutation(seed: &DrawSeed, size: u64) -> Vec<u64> {
    permutation_in_rounds(seed, &[size])
}

/// [`permutation`] for a draw in rounds (docs/drop-day.md): the visitors
/// are ranked round by round (`rounds` are the sizes), and round `k` is
/// placed on its own block of places, right after round `k − 1`'s, in a
/// uniformly random order within the block. One ChaCha20 keystream runs
/// through the rounds in order, each shuffled as [`permutation`] shuffles
/// all; one round of `n` is exactly `permutation(seed, n)`.
pub fn permutation_in_rounds(seed: &DrawSeed, rounds: &[u64]) -> Vec<u64> {
    let mut rng = ChaCha20Rng::from_seed(seed.bytes());
    let size: u64 = rounds.iter().sum();
    let mut order: Vec<u64> = (0..size).collect();
    let mut start = 0;
    for &n in rounds {
        let block = &mut order[to_index(start)..to_index(start + n)];
        for i in (1..block.len()).rev() {
            // `i + 1` fits: `i < block.len()`, and a `usize` fits in a `u64`.
            let j = below(&mut rng, i as u64 + 1);
            block.swap(i, to_index(j));
        }
        start += n;
    }
    order
}

/// A uniform draw from `0..n` (`n > 0`) by rejection. `2^64 = q·n + r` with
/// `r = 2^64 mod n`; a word in `r..2^64` is one of exactly `q·n`
/// consecutive values, among which every residue mod `n` occurs exactly
/// `q` times — so `x % n` over accepted words is exactly uniform. (A bare
/// `x % n` would favour the first `r` residues.) A word is rejected with
/// probability `r / 2^64 < n / 2^64`: next to never.
fn below(rng: &mut ChaCha20Rng, n: u64) -> u64 {
    let r = rejected_below(n);
    loop {
        let x = rng.next_u64();
        if x >= r {
            return x % n;
        }
    }
}

/// `2^64 mod n` (`n > 0`), as `(2^64 − n) mod n`: no 65-bit number needed.
fn rejected_below(n: u64) -> u64 {
    n.wrapping_neg() % n
}

/// A draw index (the permutation is in memory, so it fits).
fn to_index(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
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
        let order = p.order.clone();
        assert_eq!(order, permutation(&DrawSeed::from_random([1; 32]), 50));
        assert_eq!((p.placed(), p.dropped()), (0, 0));
        // The same draw, its cursor moved by another holder: carry on.
        assert!(p.resume(&drawing(1, 100, 50, 20)));
        assert_eq!(p.drawing().done, 20);
        assert_eq!(p.order, order, "the permutation is kept");
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

    /// The order for a seed is part of the draw's contract: schedulers of
    /// two versions holding one draw's lease in turn must agree. These
    /// values were checked against an independent implementation (Python:
    /// `cryptography`'s ChaCha20 keystream, key = seed, nonce and counter
    /// 0, read as little-endian u64 words, with the same Fisher–Yates and
    /// rejection). If this test fails, the draw changed: do not update the
    /// vectors, fix the code.
    #[test]
    fn the_permutation_of_a_seed_is_pinned() {
        let seed = DrawSeed::from_random(std::array::from_fn(|i| i as u8));
        assert_eq!(
            permutation(&seed, 20),
            [1, 18, 15, 7, 9, 10, 14, 16, 2, 4, 5, 12, 0, 19, 6, 11, 17, 8, 3, 13]
        );
        assert_eq!(
            permutation(&seed, 10_000)[..10],
            [1333, 6851, 387, 7206, 8955, 2983, 1753, 340, 1205, 478]
        );
        assert_eq!(
            permutation(&DrawSeed::from_random([7; 32]), 20),
            [19, 9, 18, 2, 4, 13, 14, 6, 17, 0, 1, 7, 11, 3, 10, 5, 15, 12, 16, 8]
        );
        assert_eq!(permutation(&seed, 1), [0]);
    }

    /// Rounds keep their blocks: every place of round `k` comes before
    /// every place of round `k + 1`, and within its block a round is a
    /// permutation. The stream is one: the first round of a draw in rounds
    /// is shuffled exactly like a draw of that size alone. Pinned like the
    /// plain permutation (same independent check).
    #[test]
    fn rounds_are_drawn_block_by_block() {
        let seed = DrawSeed::from_random(std::array::from_fn(|i| i as u8));
        let rounds = [7, 1, 4, 3];
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
        assert_eq!(order, [0, 5, 4, 6, 3, 1, 2, 7, 11, 8, 10, 9, 14, 12, 13]);
        assert_eq!(permutation_in_rounds(&seed, &[20]), permutation(&seed, 20));
        assert!(permutation_in_rounds(&seed, &[]).is_empty());
    }

    /// The rejected words are exactly the `2^64 mod n` lowest.
    #[test]
    fn the_rejection_threshold_is_two_to_the_64_mod_n() {
        let big = [u64::from(u32::MAX), 1 << 63, (1 << 63) + 1, u64::MAX];
        for n in [1, 2, 3, 7, 10, 1_000, 100_001].into_iter().chain(big) {
            let expected = (1u128 << 64) % u128::from(n);
            assert_eq!(u128::from(rejected_below(n)), expected, "n = {n}");
        }
    }

    /// Over many seeds each visitor lands in each tenth of the places about
    /// equally often (a chi-square test at p ≈ 0.001 per visitor).
    #[test]
    fn every_place_is_equally_likely() {
        const N: u64 = 50;
        const DRAWS: u32 = 4_000;
        let mut counts = vec![[0u32; 10]; N as usize];
        for d in 0..DRAWS {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&d.to_le_bytes());
            for (rank, place) in permutation(&DrawSeed::from_random(bytes), N)
                .iter()
                .enumerate()
            {
                counts[rank][(place * 10 / N) as usize] += 1;
            }
        }
        let expected = f64::from(DRAWS) / 10.0;
        for (rank, row) in counts.iter().enumerate() {
            let chi2: f64 = row
                .iter()
                .map(|&c| (f64::from(c) - expected).powi(2) / expected)
                .sum();
            // 9 degrees of freedom: P(χ² > 27.9) ≈ 0.001.
            assert!(chi2 < 27.9, "visitor {rank}: χ² = {chi2:.1} over {row:?}");
        }
    }
}
