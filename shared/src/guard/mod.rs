//! The entry guard: what a new place costs. A per-address budget and the
//! single use of a proof-of-work solution are enforced by the `enter`
//! script; the ALTCHA challenge is made and checked at the edge
//! (`queuegate_edge::altcha`), which hands the script a [`Verified`].

pub mod address;

pub use address::ClientAddress;

use crate::fields::stats;

/// A check the edge requires of a new place that the request lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardCheck {
    /// No proof-of-work solution was sent.
    Challenge,
    /// No valid Turnstile token was sent.
    Turnstile,
}

impl GuardCheck {
    /// The stats counter of its refusals (also how the script names it).
    pub fn counter(self) -> &'static str {
        match self {
            GuardCheck::Challenge => stats::REFUSED_CHALLENGE,
            GuardCheck::Turnstile => stats::REFUSED_TURNSTILE,
        }
    }

    /// The check a counter name stands for.
    pub fn from_counter(name: &str) -> Option<GuardCheck> {
        [GuardCheck::Challenge, GuardCheck::Turnstile]
            .into_iter()
            .find(|g| g.counter() == name)
    }
}

/// A proof-of-work solution the edge checked: what the `enter` script needs
/// to make its use single.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The challenge (64 hex): the key of its single use.
    pub challenge: String,
    /// Epoch ms after which it is worthless.
    pub expires_at_ms: u64,
}

/// What a new place must pass, as the edge found it. The script applies it
/// only when the visitor has no place yet: a refresh pays nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct EntryGuard<'a> {
    /// The client's address group; the budget applies when present.
    pub address: Option<&'a ClientAddress>,
    /// A verified solution, spent (single use) when the place is taken.
    pub solution: Option<&'a Verified>,
    /// A required check the request lacks.
    pub missing: Option<GuardCheck>,
}

/// The difficulty handed out: the queue's `challenge_max_number`, doubled
/// once the line is half full and again at three quarters, so a crowd that
/// fills the line pays more per place as it does.
pub fn challenge_max_number(base: u64, waiting: u64, max_waiting: u64) -> u64 {
    let max = max_waiting.max(1);
    let factor = if waiting * 4 >= max * 3 {
        4
    } else if waiting * 2 >= max {
        2
    } else {
        1
    };
    base.saturating_mul(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difficulty_rises_with_the_line() {
        assert_eq!(challenge_max_number(100_000, 0, 1000), 100_000);
        assert_eq!(challenge_max_number(100_000, 499, 1000), 100_000);
        assert_eq!(challenge_max_number(100_000, 500, 1000), 200_000);
        assert_eq!(challenge_max_number(100_000, 750, 1000), 400_000);
        assert_eq!(challenge_max_number(100_000, 5, 0), 400_000);
    }

    #[test]
    fn checks_round_trip_through_their_counters() {
        for g in [GuardCheck::Challenge, GuardCheck::Turnstile] {
            assert_eq!(GuardCheck::from_counter(g.counter()), Some(g));
        }
        assert_eq!(GuardCheck::from_counter("entered"), None);
    }
}
