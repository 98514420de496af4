//! The demo's synthetic crowd: visitors arrive over a ramp, poll as the
//! server says, some leave, the admitted ones order. Each is a
//! [`load::visitor`](crate::load::visitor), paced as the waiting-room page
//! paces a browser (one request at a time, its backoff, `Retry-After`),
//! counted live in a [`Tally`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::load::tally::Tally;
use crate::load::visitor::{self, Plan, Polling, Shared};

/// Position polls a leaver sends before it gives up (three "waiting"
/// replies, counting the one to its entry).
const LEAVER_POLLS: u32 = 2;

/// Sends `n` visitors to the worker at `base` over `ramp`; `leave_share` of
/// them stop polling at some point. Returns when all are done or `deadline`
/// passes.
pub async fn run(
    base: String,
    n: u64,
    ramp: Duration,
    leave_share: f64,
    deadline: Duration,
    tally: Arc<Tally>,
) {
    // Each visitor keeps its connection between requests, as a browser
    // does: a pool smaller than the crowd would close and reopen
    // connections for most requests, a cost real visitors do not impose.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(usize::try_from(n).unwrap_or(usize::MAX))
        .build()
        .unwrap_or_default();
    let start = Instant::now();
    let shared = Arc::new(Shared {
        base,
        // The demo does not measure admission delays.
        status: None,
        fixed_interval: Duration::from_secs(2),
        end: start + deadline,
        tally: Some(tally),
    });
    let tasks: Vec<_> = plans(n, ramp, leave_share)
        .into_iter()
        .map(|plan| {
            let (http, shared) = (http.clone(), shared.clone());
            tokio::spawn(async move { visitor::run(&http, &shared, start, plan).await })
        })
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// Visitor `i` of `n` arrives at `ramp · i/n` and polls as told; leavers
/// are spread evenly through the crowd.
fn plans(n: u64, ramp: Duration, leave_share: f64) -> Vec<Plan> {
    (0..n)
        .map(|i| Plan {
            arrive_after: ramp.mul_f64(i as f64 / n.max(1) as f64),
            polling: Polling::Adaptive,
            leave_after_polls: visitor::spread(i, leave_share).then_some(LEAVER_POLLS),
            seed: visitor::splitmix(i),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrivals_ramp_up_and_leavers_are_spread() {
        let plans = plans(10, Duration::from_secs(20), 0.3);
        let arrivals: Vec<u64> = plans.iter().map(|p| p.arrive_after.as_secs()).collect();
        assert_eq!(arrivals, [0, 2, 4, 6, 8, 10, 12, 14, 16, 18]);
        let leavers: Vec<u64> = (0..10)
            .filter(|&i| plans[i as usize].leave_after_polls.is_some())
            .collect();
        assert_eq!(leavers, [3, 6, 9]);
        assert!(plans.iter().all(|p| p.polling == Polling::Adaptive));
    }
}
