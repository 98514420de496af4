//! The public randomness beacon a draw's key mixes in (docs/drop-day.md,
//! *The beacon*): a drand round named with the opening, before anyone
//! registers, whose value nobody knows until after the seal.

use serde::{Deserialize, Serialize};

/// A beacon round named in advance (kept with the commitment).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BeaconRound {
    /// `{url}/{chain hash}` of a drand HTTP endpoint.
    pub source: String,
    /// The round.
    pub round: u64,
}

impl BeaconRound {
    /// Where its value is published: drand's `GET {source}/public/{round}`.
    pub fn url(&self) -> String {
        format!(
            "{}/public/{}",
            self.source.trim_end_matches('/'),
            self.round
        )
    }

    /// The same round read from another endpoint of the same chain
    /// (`{base}/{chain hash}`), as a verifier names it.
    pub fn at(&self, base: &str) -> BeaconRound {
        let chain = self.source.rsplit('/').next().unwrap_or_default();
        BeaconRound {
            source: format!("{}/{chain}", base.trim_end_matches('/')),
            round: self.round,
        }
    }
}

/// drand's `GET {url}/{chain hash}/info`, the part we use.
#[derive(Debug, Clone, Deserialize)]
pub struct ChainInfo {
    /// Seconds between rounds.
    pub period: u64,
    /// When round 1 was published (epoch seconds).
    pub genesis_time: u64,
}

/// drand's `GET {url}/{chain hash}/public/{round}`, the part we use.
#[derive(Debug, Clone, Deserialize)]
pub struct RoundValue {
    /// The round.
    pub round: u64,
    /// Its randomness, hex (32 bytes).
    pub randomness: String,
}

impl ChainInfo {
    /// The first round published strictly after `opens_at_ms`: round `r`
    /// is published at `genesis + (r − 1) · period`, so it is
    /// `⌊(opens_at − genesis) / period⌋ + 2` (round 1 for an opening before
    /// genesis). None for a period of 0.
    pub fn round_after(&self, opens_at_ms: u64) -> Option<u64> {
        let period_ms = self.period.checked_mul(1000).filter(|p| *p > 0)?;
        let genesis_ms = self.genesis_time.checked_mul(1000)?;
        if opens_at_ms < genesis_ms {
            return Some(1);
        }
        Some((opens_at_ms - genesis_ms) / period_ms + 2)
    }
}

impl RoundValue {
    /// The randomness when it is this round's and 32 bytes of hex.
    pub fn value_of(&self, round: u64) -> Option<String> {
        let ok = self.round == round
            && self.randomness.len() == 64
            && hex::decode(&self.randomness).is_ok();
        ok.then(|| self.randomness.to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_round_is_the_first_after_the_opening() {
        let info = ChainInfo {
            period: 3,
            genesis_time: 1_000,
        };
        // Round 1 at 1000 s, round 2 at 1003 s, round 3 at 1006 s.
        assert_eq!(info.round_after(999_999), Some(1));
        assert_eq!(info.round_after(1_000_000), Some(2));
        assert_eq!(info.round_after(1_002_999), Some(2));
        assert_eq!(info.round_after(1_003_000), Some(3));
        let zero = ChainInfo {
            period: 0,
            genesis_time: 1_000,
        };
        assert_eq!(zero.round_after(1_003_000), None);
    }

    #[test]
    fn urls_and_values() {
        let b = BeaconRound {
            source: "http://127.0.0.1:9/abcd".into(),
            round: 7,
        };
        assert_eq!(b.url(), "http://127.0.0.1:9/abcd/public/7");
        assert_eq!(
            b.at("https://api.drand.sh/").url(),
            "https://api.drand.sh/abcd/public/7"
        );
        let v = RoundValue {
            round: 7,
            randomness: "AB".repeat(32),
        };
        assert_eq!(v.value_of(7), Some("ab".repeat(32)));
        assert_eq!(v.value_of(8), None);
        let short = RoundValue {
            round: 7,
            randomness: "ab".into(),
        };
        assert_eq!(short.value_of(7), None);
    }
}
