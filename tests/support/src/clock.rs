//! The host's wall clock, read in one place: epoch milliseconds are what the
//! worker's replies (`activateAt`) and Redis `TIME` use on this machine.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Time since the Unix epoch (zero for a clock set before 1970).
pub fn since_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Epoch milliseconds.
pub fn now_ms() -> u64 {
    // u64 milliseconds last until the year 584 million.
    since_epoch().as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_ms_is_the_epoch_clock_in_milliseconds() {
        let before = since_epoch().as_millis() as u64;
        let now = now_ms();
        assert!(now >= before && now - before < 1_000);
        assert!(now > 1_600_000_000_000, "after 2020: {now}");
    }
}
