//! The entry guard: what a new place costs. A per-address budget and the
//! single use of a proof-of-work solution are enforced by the `enter`
//! script; the ALTCHA challenge is made and checked at the edge
//! (`queuegate_edge::altcha`), which hands the script a [`Verified`].

pub mod address;

pub use address::ClientAddress;

/// A check the edge requires of a new place that the request lacks (its
/// name on the wire to the `enter` script is `ops::enter`'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardCheck {
    /// No proof-of-work solution was sent.
    Challenge,
    /// No valid Turnstile token was sent.
    Turnstile,
}

impl GuardCheck {
    /// Every check.
    pub const ALL: [GuardCheck; 2] = [GuardCheck::Challenge, GuardCheck::Turnstile];
}

/// A proof-of-work solution the edge checked: what the `enter` script needs
/// to make its use single.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The challenge (64 hex): the key of its single use.
    pub challenge: String,
    /// Epoch ms after which it is worthless.
    pub expires_at_ms: u64,
    /// The difficulty level it was issued at (signed inside its salt):
    /// `enter` refuses it as stale below the level in force.
    pub level: u8,
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

/// The highest difficulty level.
pub const MAX_LEVEL: u8 = 2;

/// Where each level above 0 starts, as a share `(n, d)` of the queue's
/// `challenge_crowd`: level 1 from half of it, level 2 from three
/// quarters. The one declaration of the thresholds: the scripts' header
/// carries it as `CHALLENGE_LEVELS`, and the prelude's `challenge_level`
/// (which `challenge` and `enter` call) applies it as [`challenge_level`]
/// does here.
pub const LEVEL_FROM: [(u64, u64); MAX_LEVEL as usize] = [(1, 2), (3, 4)];

/// The difficulty level in force for a line of `size` places, against the
/// queue's `challenge_crowd` ([`LEVEL_FROM`]). `size` counts everyone a new
/// place would queue behind: the waiting line, the pre-queue and the
/// places a running draw has still to give out. The scripts compute it
/// (the `challenge` script returns it, `enter` refuses a solution of a
/// lower one); this is the same formula for tests and tools.
pub fn challenge_level(size: u64, crowd: u64) -> u8 {
    let max = crowd.max(1);
    let reached = LEVEL_FROM
        .iter()
        .take_while(|(n, d)| size.saturating_mul(*d) >= max.saturating_mul(*n))
        .count();
    // At most MAX_LEVEL (the table's length), so it fits.
    reached as u8
}

/// The difficulty of a level: the queue's `challenge_max_number`, doubled
/// per level (x1, x2, x4), so a crowd that fills the line pays more per
/// place as it does.
pub fn challenge_max_number(base: u64, level: u8) -> u64 {
    base.saturating_mul(1 << level.min(MAX_LEVEL))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn difficulty_rises_with_the_line() {
        assert_eq!(challenge_level(0, 1000), 0);
        assert_eq!(challenge_level(499, 1000), 0);
        assert_eq!(challenge_level(500, 1000), 1);
        assert_eq!(challenge_level(749, 1000), 1);
        assert_eq!(challenge_level(750, 1000), 2);
        assert_eq!(challenge_level(5, 0), 2);
        assert_eq!(challenge_level(u64::MAX, u64::MAX), 2);
        assert_eq!(challenge_max_number(100_000, 0), 100_000);
        assert_eq!(challenge_max_number(100_000, 1), 200_000);
        assert_eq!(challenge_max_number(100_000, 2), 400_000);
        assert_eq!(challenge_max_number(100_000, 9), 400_000);
        assert_eq!(challenge_max_number(u64::MAX, 2), u64::MAX);
    }
}
