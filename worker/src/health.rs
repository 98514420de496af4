//! `GET /queue/health` from the isolate: the answer of one Redis `PING` is
//! kept for [`FRESH_MS`], so the internet calling the route as often as it
//! likes costs Redis at most one command a second per isolate. An outage
//! any other request of the isolate meets shows in it at once.

use std::sync::Mutex;

/// How long one check's answer is reused.
pub const FRESH_MS: u64 = 1_000;

/// What the last check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Redis answered.
    Ok,
    /// No answer, or refused (auth).
    Unreachable,
    /// Refused for a plan limit (Upstash's request or size quota).
    Limited,
}

impl Health {
    /// The reply's `redis` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Ok => "ok",
            Health::Unreachable => "unreachable",
            Health::Limited => "limited",
        }
    }
}

/// The isolate's last check: when it started (epoch ms) and, once known,
/// what it found. A check under way counts as fresh too, so requests that
/// arrive while it runs reuse the last answer instead of pinging again.
#[derive(Debug, Default)]
pub struct HealthCache(Mutex<(Option<u64>, Option<Health>)>);

impl HealthCache {
    /// The answer to give at `now_ms` without a new check, if any: the last
    /// one when a check started less than [`FRESH_MS`] ago and one is known.
    /// Otherwise None, and the caller checks (the start is recorded).
    pub fn reuse_or_start(&self, now_ms: u64) -> Option<Health> {
        // The lock is held for a few loads, never across an await; wasm has
        // one thread, so it is never contended (and poisoning cannot
        // happen: nothing in here panics).
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (started, last) = *state;
        if let (Some(at), Some(h)) = (started, last) {
            if now_ms.saturating_sub(at) < FRESH_MS {
                return Some(h);
            }
        }
        state.0 = Some(now_ms);
        None
    }

    /// Records what another request found at `now_ms` (Redis down, or
    /// over its limit): the health answer says so for the next second.
    pub fn saw(&self, now_ms: u64, found: Health) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *state = (Some(now_ms), Some(found));
    }

    /// Records what a check found.
    pub fn record(&self, found: Health) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        state.1 = Some(found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_check_a_second_and_none_while_one_runs() {
        let cache = HealthCache::default();
        assert_eq!(
            cache.reuse_or_start(10_000),
            None,
            "the first request checks"
        );
        // Requests during the very first check have nothing to reuse.
        assert_eq!(cache.reuse_or_start(10_001), None);
        cache.record(Health::Ok);
        assert_eq!(cache.reuse_or_start(10_500), Some(Health::Ok));
        assert_eq!(cache.reuse_or_start(11_000), Some(Health::Ok));
        assert_eq!(cache.reuse_or_start(11_001), None, "stale after a second");
        // While that check runs, the last answer is reused.
        assert_eq!(cache.reuse_or_start(11_200), Some(Health::Ok));
        cache.record(Health::Limited);
        assert_eq!(cache.reuse_or_start(11_300), Some(Health::Limited));
        assert_eq!(cache.reuse_or_start(12_001), None);
        assert_eq!(Health::Limited.as_str(), "limited");
        // An outage another request met shows at once.
        cache.saw(12_100, Health::Unreachable);
        assert_eq!(cache.reuse_or_start(12_200), Some(Health::Unreachable));
    }
}
