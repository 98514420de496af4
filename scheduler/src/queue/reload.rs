//! What the config file says as it is reloaded (SIGHUP): new queue configs
//! as they come, the file's schedule, and whether a change is still to be
//! published. The holder publishes the settings it enforces when it takes
//! the lease, and again after a change.

use queuegate_shared::ops::{Change, Configure, Schedule};
use queuegate_shared::{QueueKeys, QueueState, Settings};
use tokio::sync::watch;

use crate::config::{FileSchedule, QueueConfig};
use crate::connect::RedisConn;
use crate::engine::{self, EngineError};

/// A queue's reloaded config and what is left to publish of it.
#[derive(Debug, Default)]
pub(super) struct Reload {
    /// Queue configs from a reloaded file (none: no reloads).
    reloads: Option<watch::Receiver<QueueConfig>>,
    /// The opening and closing the config file sets, published with the
    /// settings.
    schedule: FileSchedule,
    /// Settings or schedule changed while holding the lease: publish them
    /// next tick.
    pending: bool,
}

impl Reload {
    /// Publishes `schedule` with the settings.
    pub(super) fn set_schedule(&mut self, schedule: FileSchedule) {
        self.schedule = schedule;
    }

    /// Takes queue configs from `reloads` as they come.
    pub(super) fn listen(&mut self, reloads: watch::Receiver<QueueConfig>) {
        self.reloads = Some(reloads);
    }

    /// The next queue config from a reloaded file; never resolves without
    /// a sender (or once it is gone).
    pub(super) async fn next(&mut self) -> Option<QueueConfig> {
        let Some(rx) = &mut self.reloads else {
            return std::future::pending().await;
        };
        if rx.changed().await.is_err() {
            self.reloads = None;
            return std::future::pending().await;
        }
        Some(rx.borrow_and_update().clone())
    }

    /// The file's schedule now; publish it if it changed and we `hold` the
    /// lease (a new holder publishes it anyway).
    pub(super) fn schedule_reloaded(&mut self, schedule: FileSchedule, hold: bool) {
        if schedule != self.schedule {
            self.schedule = schedule;
            self.pending = hold;
        }
    }

    /// The settings changed: publish them if we `hold` the lease.
    pub(super) fn settings_reloaded(&mut self, hold: bool) {
        self.pending = hold;
    }

    /// A change waits to be published.
    pub(super) fn is_pending(&self) -> bool {
        self.pending
    }

    /// Publishes the settings this holder enforces, and the file's
    /// schedule if it sets one; the operator's state is kept (a new queue
    /// starts open). Returns the queue's state.
    pub(super) async fn publish(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        settings: &Settings,
    ) -> Result<QueueState, EngineError> {
        let state = engine::run(
            conn,
            &Configure {
                keys,
                settings,
                initial_state: QueueState::Open,
            },
        )
        .await?;
        if self.schedule.is_set() {
            let set = |t: Option<u64>| t.map_or(Change::Keep, Change::Set);
            engine::run(
                conn,
                &Schedule {
                    keys,
                    opens_at: set(self.schedule.opens_at),
                    closes_at: set(self.schedule.closes_at),
                },
            )
            .await?;
        }
        self.pending = false;
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::QueueId;
    use std::time::Duration;

    fn schedule(opens_at: u64) -> FileSchedule {
        FileSchedule {
            opens_at: Some(opens_at),
            closes_at: None,
        }
    }

    #[test]
    fn only_a_holder_has_changes_to_publish() {
        let mut r = Reload::default();
        r.schedule_reloaded(FileSchedule::default(), true);
        assert!(!r.is_pending(), "the same schedule");
        r.schedule_reloaded(schedule(1_000), false);
        assert!(
            !r.is_pending(),
            "standing by: a new holder publishes anyway"
        );
        assert_eq!(r.schedule, schedule(1_000), "but it is kept");
        r.schedule_reloaded(schedule(2_000), true);
        assert!(r.is_pending());
        r.settings_reloaded(true);
        assert!(r.is_pending());
    }

    #[tokio::test]
    async fn reloads_come_as_sent_and_stop_with_the_sender() {
        let mut r = Reload::default();
        let wait = Duration::from_millis(50);
        assert!(
            tokio::time::timeout(wait, r.next()).await.is_err(),
            "no receiver: never"
        );
        let first = QueueConfig {
            id: QueueId::new("q").unwrap(),
            settings: Settings::default(),
            schedule: FileSchedule::default(),
        };
        let (tx, rx) = watch::channel(first.clone());
        r.listen(rx);
        assert!(
            tokio::time::timeout(wait, r.next()).await.is_err(),
            "nothing new yet"
        );
        let mut second = first;
        second.settings.admit_rate_per_second = 7.0;
        tx.send_replace(second.clone());
        let got = tokio::time::timeout(wait, r.next()).await.expect("sent");
        assert_eq!(got.map(|q| q.settings), Some(second.settings));
        drop(tx);
        assert!(tokio::time::timeout(wait, r.next()).await.is_err());
        assert!(r.reloads.is_none(), "the closed channel is let go");
    }
}
