//! Each isolate's challenge terms per queue (the level in force, the
//! ALTCHA `maxnumber`, the lifetime): read with the `challenge` script at
//! most once per [`TERMS_MS`] per queue, so `GET /queue/challenge` from
//! any number of fresh clients costs Redis at most one script a second per
//! isolate and queue instead of one per request. A level that rose within
//! that second is caught where it matters: `enter` refuses a solution
//! below the level in force (`challenge_stale`) and the page solves again;
//! an isolate forgets its terms whenever it takes a place or meets a stale
//! solution, so its next challenge carries the level in force.

use std::sync::Mutex;

use queuegate_shared::ops::Terms;

/// How long an isolate reuses the terms it read (ms).
pub const TERMS_MS: u64 = 1_000;

/// Most queues whose terms one isolate keeps (the least recently read go
/// first): a `QUEUES` pattern lets clients name queues nobody runs.
const MAX_QUEUES: usize = 64;

/// The terms by queue id, each with when it was read (None: the queue has
/// no published settings, kept as long).
#[derive(Debug, Default)]
pub struct TermsCache(Mutex<Vec<(String, u64, Option<Terms>)>>);

impl TermsCache {
    /// The terms of `queue` read less than [`TERMS_MS`] before `now_ms`:
    /// `Some(None)` for a queue that had none.
    pub fn get(&self, queue: &str, now_ms: u64) -> Option<Option<Terms>> {
        // Held for a few loads, never across an await; wasm has one thread.
        let list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .find(|(q, read, _)| q == queue && now_ms.saturating_sub(*read) < TERMS_MS)
            .map(|(_, _, terms)| *terms)
    }

    /// Forgets the terms of `queue`: a place was just taken (the line
    /// grew, maybe past a level) or a solution was refused as stale, so
    /// the next challenge reads the level in force.
    pub fn forget(&self, queue: &str) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        list.retain(|(q, _, _)| q != queue);
    }

    /// Keeps what the script answered for `queue` at `now_ms`.
    pub fn put(&self, queue: &str, now_ms: u64, terms: Option<Terms>) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = list.iter_mut().find(|(q, _, _)| q == queue) {
            (e.1, e.2) = (now_ms, terms);
            return;
        }
        if list.len() >= MAX_QUEUES {
            if let Some(oldest) = (0..list.len()).min_by_key(|&i| list[i].1) {
                list.swap_remove(oldest);
            }
        }
        list.push((queue.to_string(), now_ms, terms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Terms = Terms {
        level: 1,
        max_number: 100_000,
        ttl_ms: 120_000,
    };

    #[test]
    fn terms_are_reused_for_a_second_then_read_again() {
        let c = TermsCache::default();
        assert_eq!(c.get("main", 1_000), None);
        c.put("main", 1_000, Some(T));
        c.put("gone", 1_000, None);
        assert_eq!(c.get("main", 1_999), Some(Some(T)));
        assert_eq!(c.get("gone", 1_500), Some(None));
        assert_eq!(c.get("main", 2_000), None, "a second old: read again");
        assert_eq!(c.get("other", 1_500), None);
        c.forget("gone");
        assert_eq!(c.get("gone", 1_500), None, "forgotten");
        assert_eq!(c.get("main", 1_500), Some(Some(T)));
    }

    #[test]
    fn made_up_queues_cannot_grow_the_list() {
        let c = TermsCache::default();
        for i in 0..(MAX_QUEUES as u64 * 3) {
            c.put(&format!("q{i}"), i, None);
        }
        assert_eq!(c.0.lock().unwrap().len(), MAX_QUEUES);
        // The newest are kept.
        assert!(c.get(&format!("q{}", MAX_QUEUES * 3 - 1), 200).is_some());
    }
}
