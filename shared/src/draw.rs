//! The pre-queue's draw (docs/drop-day.md, docs/uncapped-line.md): where
//! each pre-queued visitor lands at the opening, as a keyed pseudo-random
//! permutation that anyone holding the seed evaluates for one visitor in
//! O(1). The scheduler places the sealed pre-queue with it, batch by
//! batch; the edge tells a visitor its drawn place from the seed, the
//! rounds' sizes and the visitor's own signed slot, without asking Redis.
//!
//! A visitor's slot is `(round, index)`: its address group's round (an
//! address group's first pre-queued identity is in round 1, its second in
//! round 2, …) and its 0-based arrival index within the round, both fixed
//! at its enter. Round `r` is drawn on its own block of places, right
//! after round `r − 1`'s; within the block, index `i` lands on `π_r(i)`,
//! a permutation of `0..size_r` keyed by the seed.
//!
//! `π_r` is an 8-round balanced Feistel network on the smallest even
//! number of bits that covers `size_r` (round function: HMAC-SHA-256 under
//! the seed over the round, the size, the step and the half), walked until
//! it lands inside `0..size_r` (cycle walking: a permutation of the
//! larger domain restricted to the smaller one stays a permutation). With
//! a pseudo-random round function and at least 4 steps a Feistel network
//! is a pseudo-random permutation (Luby–Rackoff); 8 is the margin that
//! format-preserving encryption (FF3-1) uses. The domain is at most 4×
//! the round, so a place costs on average fewer than 4 walks of 8 HMACs.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Domain separation: the seed keys nothing else, but a version in the
/// input lets a future draw change its function without ambiguity.
const CONTEXT: &[u8] = b"queuegate-draw-v2";

/// Steps of the Feistel network.
const STEPS: u8 = 8;

/// A draw's permutation, keyed by its seed.
#[derive(Clone)]
pub struct DrawPermutation {
    mac: Hmac<Sha256>,
}

impl std::fmt::Debug for DrawPermutation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DrawPermutation(…)")
    }
}

impl DrawPermutation {
    /// The permutation of the draw whose seed is `seed` (32 random bytes).
    pub fn new(seed: &[u8; 32]) -> Self {
        // HMAC takes a key of any length: this cannot fail.
        #[allow(clippy::expect_used)]
        let mac = Hmac::<Sha256>::new_from_slice(seed).expect("HMAC takes any key length");
        DrawPermutation { mac }
    }

    /// The 0-based place, in the whole reserved range, of the visitor at
    /// `index` (0-based) of round `round` (1-based), given the sizes of
    /// all rounds from round 1 (`rounds[r − 1]`, zeros included). `None`
    /// for a slot outside them.
    pub fn place(&self, rounds: &[u64], round: u64, index: u64) -> Option<u64> {
        let r = usize::try_from(round.checked_sub(1)?).ok()?;
        let size = *rounds.get(r)?;
        if index >= size {
            return None;
        }
        let offset = rounds[..r]
            .iter()
            .try_fold(0u64, |sum, &n| sum.checked_add(n))?;
        Some(offset + self.within(round, size, index))
    }

    /// `π_round(index)` in `0..size` (`index < size`).
    pub fn within(&self, round: u64, size: u64, index: u64) -> u64 {
        if size <= 1 {
            return 0;
        }
        // Bits of the largest index, rounded up to an even number.
        let bits = 64 - (size - 1).leading_zeros();
        let half = bits.div_ceil(2);
        let mut x = index;
        loop {
            x = self.feistel(round, size, half, x);
            if x < size {
                return x;
            }
        }
    }

    /// One pass of the network over `2 × half` bits.
    fn feistel(&self, round: u64, size: u64, half: u32, x: u64) -> u64 {
        let mask = (1u64 << half) - 1;
        let (mut left, mut right) = (x >> half, x & mask);
        for step in 0..STEPS {
            let f = self.round_function(round, size, step, right) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << half) | right
    }

    fn round_function(&self, round: u64, size: u64, step: u8, half: u64) -> u64 {
        let mut m = self.mac.clone();
        m.update(CONTEXT);
        m.update(&round.to_be_bytes());
        m.update(&size.to_be_bytes());
        m.update(&[step]);
        m.update(&half.to_be_bytes());
        let out = m.finalize().into_bytes();
        let mut word = [0u8; 8];
        word.copy_from_slice(&out[..8]);
        u64::from_be_bytes(word)
    }
}

/// A pre-queued visitor's slot in the draw: its round (1-based) and its
/// arrival index in the round (0-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrawSlot {
    /// The address group's round.
    pub round: u64,
    /// The arrival index within the round.
    pub index: u64,
}

impl DrawSlot {
    /// The slot a pre-queue score holds: `(round − 1) × DRAW_ROUND_SPAN +
    /// index + 1` (lua/prelude.lua); `None` for a score that holds none.
    pub fn from_score(score: u64) -> Option<DrawSlot> {
        let span = crate::fields::DRAW_ROUND_SPAN;
        Some(DrawSlot {
            round: score / span + 1,
            index: (score % span).checked_sub(1)?,
        })
    }
}

/// The slot `(round, index)` of the visitor at `rank` (0-based) in a draw
/// whose rounds have these sizes; `None` past the last.
pub fn slot_of_rank(rounds: &[u64], rank: u64) -> Option<(u64, u64)> {
    let mut start = 0u64;
    for (r, &n) in rounds.iter().enumerate() {
        if rank < start + n {
            return Some((r as u64 + 1, rank - start));
        }
        start += n;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(b: u8) -> [u8; 32] {
        [b; 32]
    }

    #[test]
    fn each_round_is_a_permutation_of_its_block() {
        let p = DrawPermutation::new(&seed(7));
        let rounds = [1_000, 0, 37, 1, 2, 513];
        let total: u64 = rounds.iter().sum();
        let mut seen = vec![false; total as usize];
        let mut start = 0;
        for (r, &n) in rounds.iter().enumerate() {
            for i in 0..n {
                let place = p.place(&rounds, r as u64 + 1, i).unwrap();
                assert!(
                    (start..start + n).contains(&place),
                    "round {} in its block",
                    r + 1
                );
                assert!(!seen[place as usize], "place {place} twice");
                seen[place as usize] = true;
            }
            start += n;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn a_slot_outside_the_rounds_has_no_place() {
        let p = DrawPermutation::new(&seed(1));
        let rounds = [3, 0, 2];
        assert_eq!(p.place(&rounds, 0, 0), None);
        assert_eq!(p.place(&rounds, 2, 0), None, "an empty round");
        assert_eq!(p.place(&rounds, 1, 3), None);
        assert_eq!(p.place(&rounds, 4, 0), None);
        assert_eq!(p.place(&rounds, u64::MAX, 0), None);
        assert!(p.place(&rounds, 3, 1).unwrap() >= 3);
    }

    #[test]
    fn the_seed_decides() {
        let a: Vec<u64> = (0..100)
            .map(|i| DrawPermutation::new(&seed(1)).within(1, 100, i))
            .collect();
        let b: Vec<u64> = (0..100)
            .map(|i| DrawPermutation::new(&seed(2)).within(1, 100, i))
            .collect();
        let again: Vec<u64> = (0..100)
            .map(|i| DrawPermutation::new(&seed(1)).within(1, 100, i))
            .collect();
        assert_eq!(a, again);
        assert_ne!(a, b);
        assert_ne!(a, (0..100).collect::<Vec<_>>(), "shuffled");
        // Another round of the same size is drawn on its own.
        let other: Vec<u64> = (0..100)
            .map(|i| DrawPermutation::new(&seed(1)).within(2, 100, i))
            .collect();
        assert_ne!(a, other);
    }

    #[test]
    fn a_score_holds_a_slot() {
        let span = crate::fields::DRAW_ROUND_SPAN;
        assert_eq!(
            DrawSlot::from_score(1),
            Some(DrawSlot { round: 1, index: 0 })
        );
        assert_eq!(
            DrawSlot::from_score(2 * span + 7),
            Some(DrawSlot { round: 3, index: 6 })
        );
        assert_eq!(DrawSlot::from_score(span), None, "index 0 is never given");
    }

    #[test]
    fn ranks_map_to_slots_round_by_round() {
        let rounds = [2, 0, 3];
        let slots: Vec<_> = (0..6).map(|k| slot_of_rank(&rounds, k)).collect();
        assert_eq!(
            slots,
            [
                Some((1, 0)),
                Some((1, 1)),
                Some((3, 0)),
                Some((3, 1)),
                Some((3, 2)),
                None
            ]
        );
    }

    /// The function is part of the draw's contract: the scheduler that
    /// places a visitor and the edge that tells it its place must agree,
    /// across versions. If this test fails the draw changed: do not update
    /// the vectors, fix the code.
    #[test]
    fn the_permutation_of_a_seed_is_pinned() {
        let s: [u8; 32] = std::array::from_fn(|i| i as u8);
        let p = DrawPermutation::new(&s);
        let first: Vec<u64> = (0..20).map(|i| p.within(1, 20, i)).collect();
        assert_eq!(first, PINNED_20);
        let big: Vec<u64> = (0..5).map(|i| p.within(1, 1_000_000, i)).collect();
        assert_eq!(big, PINNED_1M);
    }

    // Checked against an independent implementation (Python's `hmac` and
    // `hashlib`, the same network written from this module's docs).
    const PINNED_20: [u64; 20] = [
        5, 19, 1, 10, 8, 4, 11, 16, 9, 13, 15, 2, 12, 3, 14, 7, 18, 6, 0, 17,
    ];
    const PINNED_1M: [u64; 5] = [707_655, 520_912, 336_922, 306_407, 540_062];

    /// Over many seeds each visitor lands in each tenth of the places about
    /// equally often (a chi-square test at p ≈ 0.001 per visitor), and
    /// pairs of visitors are independent: visitor 0 is ahead of visitor 1
    /// about half the time.
    #[test]
    fn every_place_is_equally_likely() {
        const N: u64 = 50;
        const DRAWS: u32 = 4_000;
        let mut counts = vec![[0u32; 10]; N as usize];
        let mut first_ahead = 0u32;
        for d in 0..DRAWS {
            let mut bytes = [0u8; 32];
            bytes[..4].copy_from_slice(&d.to_le_bytes());
            let p = DrawPermutation::new(&bytes);
            let places: Vec<u64> = (0..N).map(|i| p.within(1, N, i)).collect();
            for (rank, place) in places.iter().enumerate() {
                counts[rank][(place * 10 / N) as usize] += 1;
            }
            if places[0] < places[1] {
                first_ahead += 1;
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
        // Binomial(4000, ½): σ ≈ 31.6; 4σ either side.
        assert!((1_874..=2_126).contains(&first_ahead), "{first_ahead}");
    }
}
