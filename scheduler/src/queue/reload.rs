//! What the config file says as it is reloaded (SIGHUP): new queue configs
//! as they come, the file's schedule and fingerprint, and what is still to
//! be published. The holder publishes the settings it enforces when it
//! takes the lease and after a change; its file (fingerprint and schedule)
//! only where none is published yet, or when it is reloaded — never over
//! a newer schedule (issue 37, docs/scheduler.md *Fail-over*).

use queuegate_shared::ops::{Configure, FileMoment, FilePublished, PublishFile};
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
    /// The opening and closing the config file sets.
    schedule: FileSchedule,
    /// The fingerprint of the file's settings and schedule.
    fingerprint: String,
    /// Settings changed while holding the lease: publish them next tick.
    pending: bool,
    /// The file was reloaded while holding the lease: publish it (it
    /// replaces the published one) next tick, with its schedule's times
    /// if they changed.
    file_reloaded: Option<FileSchedule>,
}

impl Reload {
    /// The file's schedule and fingerprint at start.
    pub(super) fn set_file(&mut self, schedule: FileSchedule, fingerprint: String) {
        self.schedule = schedule;
        self.fingerprint = fingerprint;
    }

    /// The fingerprint of this process's file.
    pub(super) fn fingerprint(&self) -> &str {
        &self.fingerprint
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

    /// The file was reloaded: if we `hold` the lease it is published next
    /// tick (replacing the published file), with only the schedule's
    /// times that changed, so a reload never repeats a time an operator
    /// has moved since. A standby only keeps it.
    pub(super) fn file_reloaded(&mut self, q: &QueueConfig, hold: bool) {
        let changed = FileSchedule {
            opens_at: q
                .schedule
                .opens_at
                .filter(|_| q.schedule.opens_at != self.schedule.opens_at),
            closes_at: q
                .schedule
                .closes_at
                .filter(|_| q.schedule.closes_at != self.schedule.closes_at),
        };
        self.schedule = q.schedule;
        self.fingerprint = q.fingerprint();
        if hold {
            let before = self.file_reloaded.unwrap_or_default();
            self.file_reloaded = Some(FileSchedule {
                opens_at: changed.opens_at.or(before.opens_at),
                closes_at: changed.closes_at.or(before.closes_at),
            });
            self.pending = true;
        }
    }

    /// The settings changed: publish them if we `hold` the lease.
    pub(super) fn settings_reloaded(&mut self, hold: bool) {
        self.pending = self.pending || hold;
    }

    /// A change waits to be published.
    pub(super) fn is_pending(&self) -> bool {
        self.pending
    }

    /// Publishes this process's file (its fingerprint, `file` settings and
    /// schedule) as the holder that took the lease (`TakeOver`: only where
    /// none is published) or, after a reload, as its replacement.
    pub(super) async fn publish_file(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        owner: &str,
        file: &Settings,
        moment: FileMoment,
    ) -> Result<FilePublished, EngineError> {
        let times = match moment {
            FileMoment::TakeOver => self.schedule,
            FileMoment::Reload => self.file_reloaded.unwrap_or_default(),
        };
        let published = engine::run(
            conn,
            &PublishFile {
                keys,
                owner,
                fingerprint: &self.fingerprint,
                settings_json: serde_json::to_string(file).unwrap_or_default(),
                moment,
                opens_at: times.opens_at,
                closes_at: times.closes_at,
            },
        )
        .await?;
        if moment == FileMoment::Reload {
            self.file_reloaded = None;
        }
        Ok(published)
    }

    /// A reloaded file waits to be published.
    pub(super) fn file_is_pending(&self) -> bool {
        self.file_reloaded.is_some()
    }

    /// Publishes the settings this holder enforces; the operator's state
    /// is kept (a new queue starts open). Returns the queue's state.
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

    fn queue(schedule: FileSchedule) -> QueueConfig {
        QueueConfig {
            id: QueueId::new("q").unwrap(),
            settings: Settings::default(),
            schedule,
        }
    }

    #[test]
    fn only_a_holder_publishes_a_reloaded_file_and_only_the_times_it_changed() {
        let mut r = Reload::default();
        r.file_reloaded(&queue(schedule(1_000)), false);
        assert!(!r.is_pending() && !r.file_is_pending(), "standing by");
        assert_eq!(r.schedule, schedule(1_000), "but it is kept");
        assert_eq!(r.fingerprint(), queue(schedule(1_000)).fingerprint());
        r.file_reloaded(&queue(schedule(1_000)), true);
        assert!(r.is_pending() && r.file_is_pending());
        assert_eq!(
            r.file_reloaded,
            Some(FileSchedule::default()),
            "an unchanged opening is not published again"
        );
        r.file_reloaded(&queue(schedule(2_000)), true);
        assert_eq!(r.file_reloaded, Some(schedule(2_000)));
        assert_ne!(r.fingerprint(), queue(schedule(1_000)).fingerprint());
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
