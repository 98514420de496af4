//! How well the chance shown to waiting visitors matches what happened to
//! them: predictions binned by decile (0 and 100 apart), the observed
//! frequency per bin, and the Brier score.

/// Bins: exactly 0, the deciles 0–10 … 90–100 (open at 0 and 100, a
/// decile's upper edge in it: 10 falls in 0–10, 11 in 10–20), exactly 100.
pub const BINS: usize = 12;

/// The bin of a prediction in percent.
pub fn bin(percent: u8) -> usize {
    match percent {
        0 => 0,
        100.. => BINS - 1,
        p => 1 + (usize::from(p) - 1) / 10,
    }
}

/// The bin's label for a table.
pub fn label(bin: usize) -> String {
    match bin {
        0 => "0 %".into(),
        b if b == BINS - 1 => "100 %".into(),
        b => format!("{}–{} %", (b - 1) * 10, b * 10),
    }
}

/// Predictions with their outcomes, added up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    /// Per bin: predictions, sum of predicted probabilities, outcomes true.
    pub bins: [(u64, f64, u64); BINS],
    /// Sum of squared errors (probability against 0/1).
    pub squared: f64,
}

impl Calibration {
    /// Adds one prediction (percent) and what came of it.
    pub fn add(&mut self, percent: u8, happened: bool) {
        let p = f64::from(percent.min(100)) / 100.0;
        let b = &mut self.bins[bin(percent)];
        b.0 += 1;
        b.1 += p;
        b.2 += u64::from(happened);
        let o = if happened { 1.0 } else { 0.0 };
        self.squared += (p - o) * (p - o);
    }

    /// Predictions added.
    pub fn count(&self) -> u64 {
        self.bins.iter().map(|b| b.0).sum()
    }

    /// The Brier score: the mean squared error (0 perfect, 0.25 a coin).
    pub fn brier(&self) -> f64 {
        self.squared / self.count().max(1) as f64
    }

    /// Per bin with predictions: label, mean predicted, observed
    /// frequency, count.
    pub fn rows(&self) -> Vec<(String, f64, f64, u64)> {
        (0..BINS)
            .filter(|&b| self.bins[b].0 > 0)
            .map(|b| {
                let (n, sum, yes) = self.bins[b];
                (label(b), sum / n as f64, yes as f64 / n as f64, n)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_and_hundred_have_bins_of_their_own() {
        assert_eq!(bin(0), 0);
        assert_eq!(bin(1), 1);
        assert_eq!(bin(10), 1);
        assert_eq!(bin(11), 2);
        assert_eq!(bin(90), 9);
        assert_eq!(bin(99), 10);
        assert_eq!(bin(100), 11);
        assert_eq!(label(0), "0 %");
        assert_eq!(label(1), "0–10 %");
        assert_eq!(label(10), "90–100 %");
        assert_eq!(label(11), "100 %");
    }

    #[test]
    fn a_calibrated_forecast_matches_its_frequencies() {
        let mut c = Calibration::default();
        for i in 0..10 {
            c.add(30, i < 3);
            c.add(100, true);
            c.add(0, false);
        }
        let rows = c.rows();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1].0, "20–30 %");
        assert!((rows[1].1 - 0.3).abs() < 1e-12 && (rows[1].2 - 0.3).abs() < 1e-12);
        assert_eq!(c.count(), 30);
        // Only the 30 % ones err: 3 × 0.49 + 7 × 0.09 over 30.
        assert!((c.brier() - (3.0 * 0.49 + 7.0 * 0.09) / 30.0).abs() < 1e-12);
    }
}
