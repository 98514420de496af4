//! The lease as this process sees it: standing by, or holding it until a
//! conservative deadline. The lease only keeps one scheduler busy per
//! queue; safety lives in the scripts' owner fencing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_shared::ops::{LeaseAcquire, LeaseAcquired, LeaseRelease};
use queuegate_shared::QueueKeys;

use crate::connect::RedisConn;
use crate::engine::{self, EngineError};

/// Standing by, or holding the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Standby,
    /// Held; `valid_until` is conservative (measured from before the call
    /// that took or renewed it was sent).
    Leader {
        valid_until: Instant,
    },
}

/// One queue's lease: this process's owner id, its role, and who was last
/// seen holding it.
#[derive(Debug)]
pub(super) struct Lease {
    owner: Arc<str>,
    role: Role,
    /// The holder last reported (so "standing by" is logged once per holder).
    holder: Option<String>,
    /// Standing by: the holder's lease runs until about then; asking
    /// before is pointless (None: ask at the next tick).
    next_try: Option<Instant>,
}

impl Lease {
    /// Standing by, as `owner`.
    pub(super) fn new(owner: Arc<str>) -> Self {
        Lease {
            owner,
            role: Role::Standby,
            holder: None,
            next_try: None,
        }
    }

    /// This process's owner id: every fenced script call names it.
    pub(super) fn owner(&self) -> &str {
        &self.owner
    }

    /// Held (perhaps run out): there is something to lose or release.
    pub(super) fn is_held(&self) -> bool {
        self.role != Role::Standby
    }

    /// Held and surely still ours at `now`: the tick need not take it.
    pub(super) fn valid_at(&self, now: Instant) -> bool {
        matches!(self.role, Role::Leader { valid_until } if now < valid_until)
    }

    /// A call sent at `sent` took or extended it for `ttl`. Returns
    /// whether it was held before (our own lease, extended after an outage).
    pub(super) fn taken(&mut self, sent: Instant, ttl: Duration) -> bool {
        let was_held = self.is_held();
        self.renewed(sent, ttl);
        was_held
    }

    /// An admit sent at `sent` extended it for `ttl`.
    pub(super) fn renewed(&mut self, sent: Instant, ttl: Duration) {
        self.role = Role::Leader {
            valid_until: sent + ttl,
        };
    }

    /// Back to standing by (lost, or released).
    pub(super) fn stand_by(&mut self) {
        self.role = Role::Standby;
    }

    /// Another holder's lease runs for `ttl` more from `now`. Longer than
    /// a busy lease (`busy`: the holder is idle and waits for a wake-up),
    /// try again when it would run out, or after an idle wait at most: an
    /// idle room's standby asks about once per idle wait, sees a holder
    /// gone busy within one, and replaces one that died when its lease is
    /// gone. A busy holder's standby asks every tick, as ever: a holder
    /// that stops releases its lease, and the standby takes over within a
    /// tick.
    pub(super) fn retry_in(&mut self, now: Instant, ttl: Duration, busy: Duration) {
        // At most IDLE_WAIT_MS apart: a holder that goes busy again is
        // seen within that, and from then on every tick.
        let most = Duration::from_millis(queuegate_shared::settings::IDLE_WAIT_MS);
        self.next_try = (ttl > busy).then(|| now + ttl.min(most));
    }

    /// Whether a standby should ask Redis at `now`.
    pub(super) fn may_try(&self, now: Instant) -> bool {
        self.next_try.is_none_or(|t| now >= t)
    }

    /// `holder` holds the lease; true when that is news.
    pub(super) fn seen(&mut self, holder: &str) -> bool {
        if self.holder.as_deref() == Some(holder) {
            return false;
        }
        self.holder = Some(holder.to_string());
        true
    }

    /// This process holds it (noted once it has published its settings).
    pub(super) fn seen_ours(&mut self) {
        self.holder = Some(self.owner.to_string());
    }

    /// Takes the lease for `ttl_ms`, or extends it if it is still ours.
    /// Only asks Redis: the caller applies the answer.
    pub(super) async fn acquire(
        &self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        ttl_ms: u64,
    ) -> Result<LeaseAcquired, EngineError> {
        engine::run(
            conn,
            &LeaseAcquire {
                keys,
                owner: &self.owner,
                ttl_ms,
            },
        )
        .await
    }

    /// Gives the lease up (shutdown) and stands by. `None` when it was not
    /// held; otherwise whether it was still ours.
    pub(super) async fn release(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
    ) -> Option<Result<bool, EngineError>> {
        if !self.is_held() {
            return None;
        }
        let released = engine::run(
            conn,
            &LeaseRelease {
                keys,
                owner: &self.owner,
            },
        )
        .await;
        self.stand_by();
        Some(released)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_millis(3_000);

    #[test]
    fn a_lease_is_valid_until_its_ttl_counted_from_the_call() {
        let mut lease = Lease::new("a".into());
        let t0 = Instant::now();
        assert!(!lease.is_held() && !lease.valid_at(t0));
        assert!(!lease.taken(t0, TTL), "a new lease");
        assert!(lease.is_held());
        assert!(lease.valid_at(t0 + TTL - Duration::from_millis(1)));
        assert!(!lease.valid_at(t0 + TTL), "ends at sent + ttl, not after");
        // An admit sent later renews it from its own send time.
        lease.renewed(t0 + TTL / 2, TTL);
        assert!(lease.valid_at(t0 + TTL));
        assert!(!lease.valid_at(t0 + TTL / 2 + TTL));
    }

    #[test]
    fn a_run_out_lease_is_still_held_until_lost() {
        let mut lease = Lease::new("a".into());
        let t0 = Instant::now();
        lease.taken(t0, TTL);
        let later = t0 + TTL * 2;
        assert!(!lease.valid_at(later));
        assert!(lease.is_held(), "ours until Redis says otherwise");
        assert!(lease.taken(later, TTL), "extended after an outage");
        lease.stand_by();
        assert!(!lease.is_held() && !lease.valid_at(later));
        assert!(!lease.taken(later, TTL), "taken anew after a loss");
    }

    #[test]
    fn a_standby_asks_again_when_the_holders_lease_would_run_out() {
        let mut lease = Lease::new("a".into());
        let t0 = Instant::now();
        assert!(lease.may_try(t0), "a new standby asks at once");
        let busy = Duration::from_millis(2_000);
        lease.retry_in(t0, TTL, busy);
        assert!(!lease.may_try(t0 + TTL - Duration::from_millis(1)));
        assert!(lease.may_try(t0 + TTL));
        lease.retry_in(t0, Duration::from_secs(3_600), busy);
        assert!(
            lease.may_try(t0 + Duration::from_millis(queuegate_shared::settings::IDLE_WAIT_MS)),
            "at most an idle wait apart"
        );
        lease.retry_in(t0, busy, busy);
        assert!(lease.may_try(t0), "a busy holder's standby asks every tick");
    }

    #[test]
    fn each_new_holder_is_news_once() {
        let mut lease = Lease::new("a".into());
        assert_eq!(lease.owner(), "a");
        assert!(lease.seen("b"));
        assert!(!lease.seen("b"));
        assert!(lease.seen("c"));
        assert!(lease.seen("b"));
        lease.seen_ours();
        assert!(!lease.seen("a"), "we were the holder");
    }
}
