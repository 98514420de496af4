//! The pre-queue's draw (docs/drop-day.md): the permutation that gives each
//! sealed visitor a place, from a seed the OS CSPRNG made and Redis keeps,
//! so a scheduler that takes over a running draw computes the same one.

use queuegate_shared::ops::DrawSeed;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A fresh seed from the OS CSPRNG.
pub fn fresh_seed() -> Result<DrawSeed, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(DrawSeed::from_random(bytes))
}

/// `order[rank]` is the 0-based place, within the reserved tickets, of the
/// `rank`-th sealed visitor (by arrival): a uniformly random permutation
/// (Fisher–Yates driven by ChaCha20), the same for the same seed and size.
pub fn permutation(seed: &DrawSeed, size: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..size).collect();
    order.shuffle(&mut ChaCha20Rng::from_seed(seed.bytes()));
    order
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
