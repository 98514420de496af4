//! Summaries of measured samples (latencies, polls, costs), written once so
//! that every benchmark and load figure ranks its samples the same way:
//! nearest rank, no interpolation, so a reported p99 is a value that was
//! actually measured.

/// The `q`-quantile of ascending `sorted` by nearest rank (`q` from 0 to 1):
/// the value at rank ⌈q·n⌉, clamped to the first and last; None when empty.
///
/// Generic over the sample's type (f64 ms, `Duration`, u64 µs). The slice
/// must be sorted; an unsorted one gives a value, but not the quantile.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len().max(1)) - 1).copied()
}

/// The `p`-th percentile (`p` from 0 to 100) of ascending `sorted` by
/// nearest rank, NaN when empty: [`quantile`] for figures in f64, whose
/// tables print NaN for "no samples".
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    quantile(sorted, p / 100.0).unwrap_or(f64::NAN)
}

/// Arithmetic mean, 0 when empty.
pub fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn nothing_to_rank() {
        assert_eq!(quantile::<u64>(&[], 0.5), None);
        assert_eq!(quantile::<u64>(&[], 0.0), None);
        assert!(percentile(&[], 50.0).is_nan());
        assert_eq!(mean(&[]), 0.0);
    }

    #[test]
    fn one_value_is_every_quantile() {
        for q in [0.0, 0.01, 0.5, 0.99, 1.0] {
            assert_eq!(quantile(&[7u64], q), Some(7));
        }
        assert_eq!(percentile(&[7.0], 1.0), 7.0);
        assert_eq!(mean(&[7.0]), 7.0);
    }

    #[test]
    fn exact_ranks_of_one_to_a_hundred() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.0), Some(1), "clamped to the first");
        assert_eq!(quantile(&v, 0.01), Some(1));
        assert_eq!(quantile(&v, 0.5), Some(50));
        assert_eq!(quantile(&v, 0.95), Some(95));
        assert_eq!(quantile(&v, 0.99), Some(99));
        assert_eq!(quantile(&v, 1.0), Some(100));
        let f: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&f, 50.0), 50.0);
        assert_eq!(percentile(&f, 95.0), 95.0);
        assert_eq!(percentile(&f, 100.0), 100.0);
        assert_eq!(mean(&f), 50.5);
    }

    #[test]
    fn nearest_rank_never_interpolates() {
        // Between ranks the next one up is taken: the median of an even
        // count is the lower middle, never the mean of the two.
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 50.0), 2.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 51.0), 3.0);
        assert_eq!(percentile(&[10.0, 20.0], 50.0), 10.0);
        assert_eq!(percentile(&[1.0, 2.0, 3.0], 50.0), 2.0);
    }

    #[test]
    fn durations_rank_like_numbers() {
        let t: Vec<Duration> = (1..=20).map(Duration::from_millis).collect();
        assert_eq!(quantile(&t, 0.5), Some(Duration::from_millis(10)));
        assert_eq!(quantile(&t, 0.95), Some(Duration::from_millis(19)));
        assert_eq!(quantile(&t, 1.0), Some(Duration::from_millis(20)));
    }
}
