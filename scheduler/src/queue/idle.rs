//! An idle room (issue 27): while nobody waits or is pre-queued, no slot
//! is in use and no draw runs, the lease holder does not tick ten times a
//! second. It blocks on the queue's `wake` list (BLPOP, on a connection
//! of its own so the shared one is never held) until the edge wakes it —
//! the first visitor of an empty line or pre-queue pushes to it, and so
//! does a change of the run-time settings — or [`IDLE_WAIT_MS`] pass; then
//! it ticks. Its admit extends the lease by the longer idle TTL, so the
//! lease outlasts the wait, and a standby, which tries only when the
//! lease would run out, tries rarely too (docs/scheduler.md, *An idle
//! room*).

use std::time::{Duration, Instant};

use queuegate_shared::ops::AdmitCounts;
use queuegate_shared::settings::IDLE_WAIT_MS;
use queuegate_shared::QueueKeys;

use crate::config::RedisConfig;
use crate::connect::{self, Patience, RedisConn};

/// How long a queue must have been idle before its holder waits instead
/// of ticking: a room between two bursts keeps ticking, and a standby
/// that has just started sees a busy lease (and asks every tick).
pub(super) const IDLE_AFTER: Duration = Duration::from_secs(10);

/// The idle state of one queue's holder and its waiting connection.
#[derive(Debug, Default)]
pub(super) struct Idle {
    /// Where to open the waiting connection (None: never idle; the tests'
    /// workers built without a config tick as before).
    redis: Option<RedisConfig>,
    /// The waiting connection, opened at the first idle wait.
    conn: Option<RedisConn>,
    /// Since when the queue has been idle, tick after tick.
    since: Option<Instant>,
    /// The last admit left it idle and extended the lease by the idle
    /// TTL: the holder may wait.
    waiting: bool,
    /// The last wait ended with a wake-up, not a timeout.
    woken: bool,
}

impl Idle {
    /// Idles with its own connection to this Redis.
    pub(super) fn with_redis(redis: RedisConfig) -> Self {
        Idle {
            redis: Some(redis),
            ..Idle::default()
        }
    }

    /// Whether the next admit should extend the lease by the idle TTL:
    /// idle for [`IDLE_AFTER`] already.
    pub(super) fn idle_lease(&self, now: Instant) -> bool {
        self.redis.is_some()
            && self
                .since
                .is_some_and(|t| now.duration_since(t) >= IDLE_AFTER)
    }

    /// What an admit sent with `idle_lease` saw at `now`: idle when
    /// nothing needs a tick.
    pub(super) fn saw(&mut self, c: &AdmitCounts, idle_lease: bool, now: Instant) {
        let idle = c.waiting == 0 && c.active == 0 && c.pre_queued == 0 && !c.drawing;
        self.since = if idle {
            Some(self.since.unwrap_or(now))
        } else {
            None
        };
        self.waiting = idle && idle_lease;
    }

    /// Whether the holder may wait instead of ticking (its lease was
    /// extended by the idle TTL).
    pub(super) fn is_idle(&self) -> bool {
        self.waiting
    }

    /// Busy again (the lease was lost or must be taken).
    pub(super) fn stop(&mut self) {
        self.since = None;
        self.waiting = false;
    }

    /// Whether the last wait ended with a wake-up (cleared as read): the
    /// edge's first visitor, or an operator's `schedule`.
    pub(super) fn take_woken(&mut self) -> bool {
        std::mem::take(&mut self.woken)
    }

    /// Waits for a wake-up or [`IDLE_WAIT_MS`]. True when Redis answered
    /// (woken or timed out); false when the wait failed (then it waited a
    /// second instead, and the next tick tells whether Redis is there).
    pub(super) async fn wait(&mut self, keys: &QueueKeys) -> bool {
        if self.conn.is_none() {
            let Some(mut redis) = self.redis.clone() else {
                return false;
            };
            // The blocking call must not be cut short by the response
            // timeout meant for ticks.
            redis.response_timeout =
                Duration::from_millis(IDLE_WAIT_MS) + redis.response_timeout * 4;
            match connect::open(&redis, Patience::Service).await {
                Ok(conn) => self.conn = Some(conn),
                Err(e) => {
                    tracing::warn!(queue = keys.queue().as_str(), error = %e, "cannot open the idle wait's connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    return false;
                }
            }
        }
        let Some(conn) = self.conn.as_mut() else {
            return false;
        };
        let woken: redis::RedisResult<Option<(String, String)>> = redis::cmd("BLPOP")
            .arg(keys.wake())
            .arg(IDLE_WAIT_MS as f64 / 1000.0)
            .query_async(conn)
            .await;
        match woken {
            Ok(popped) => {
                self.woken = popped.is_some();
                true
            }
            Err(e) => {
                tracing::debug!(queue = keys.queue().as_str(), error = %e, "idle wait failed");
                self.conn = None;
                tokio::time::sleep(Duration::from_secs(1)).await;
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_only_when_nothing_needs_a_tick() {
        let mut idle = Idle::with_redis(RedisConfig {
            endpoint: crate::config::Endpoint::Single("redis://127.0.0.1:1".into()),
            username: None,
            password: None,
            ca_file: None,
            connect_timeout: Duration::from_millis(100),
            response_timeout: Duration::from_millis(100),
        });
        let t0 = Instant::now();
        idle.saw(&AdmitCounts::default(), false, t0);
        assert!(!idle.is_idle(), "not before the lease was extended for it");
        assert!(!idle.idle_lease(t0 + IDLE_AFTER / 2));
        assert!(idle.idle_lease(t0 + IDLE_AFTER), "idle long enough");
        idle.saw(&AdmitCounts::default(), true, t0 + IDLE_AFTER);
        assert!(idle.is_idle());
        for busy in [
            AdmitCounts {
                waiting: 1,
                ..AdmitCounts::default()
            },
            AdmitCounts {
                active: 1,
                ..AdmitCounts::default()
            },
            AdmitCounts {
                pre_queued: 1,
                ..AdmitCounts::default()
            },
            AdmitCounts {
                drawing: true,
                ..AdmitCounts::default()
            },
        ] {
            idle.saw(&busy, true, t0 + IDLE_AFTER);
            assert!(!idle.is_idle(), "{busy:?}");
            assert!(
                !idle.idle_lease(t0 + IDLE_AFTER * 2),
                "the idle time starts over"
            );
        }
        idle.saw(&AdmitCounts::default(), true, t0);
        idle.stop();
        assert!(!idle.is_idle());
        let mut never = Idle::default();
        never.saw(&AdmitCounts::default(), false, t0);
        assert!(
            !never.idle_lease(t0 + IDLE_AFTER * 2),
            "without a Redis config: ticks as before"
        );
    }
}
