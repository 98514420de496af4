//! Live counters across a crowd's visitors, for a status line while it
//! runs (a [`Record`](super::visitor::Record) only exists once a visitor ends).

use std::sync::atomic::{AtomicU64, Ordering};

/// Crowd counters, bumped by every visitor as it goes.
#[derive(Debug, Default)]
pub struct Tally {
    /// Visitors who entered.
    pub entered: AtomicU64,
    /// Polls sent (and answered).
    pub polls: AtomicU64,
    /// Visitors admitted.
    pub admitted: AtomicU64,
    /// Orders the origin accepted.
    pub ordered: AtomicU64,
    /// Visitors who gave up on purpose.
    pub left: AtomicU64,
    /// Requests that failed, and entries refused.
    pub errors: AtomicU64,
}

impl Tally {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "crowd: entered {} · admitted {} · ordered {} · left {} · polls {} · errors {}",
            g(&self.entered),
            g(&self.admitted),
            g(&self.ordered),
            g(&self.left),
            g(&self.polls),
            g(&self.errors)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_every_counter() {
        let t = Tally::default();
        t.entered.fetch_add(3, Ordering::Relaxed);
        t.polls.fetch_add(7, Ordering::Relaxed);
        t.left.fetch_add(1, Ordering::Relaxed);
        assert_eq!(
            t.line(),
            "crowd: entered 3 · admitted 0 · ordered 0 · left 1 · polls 7 · errors 0"
        );
    }
}
