//! The settings in force for one queue: this process's file, the
//! published file's settings a standby keeps on take-over, the run-time
//! settings an operator put over them, and their publishing by the holder.

use queuegate_shared::ops::{FileMoment, FilePublished};
use queuegate_shared::{QueueState, Settings};

use super::{QueueWorker, TickError};
use crate::runtime::{self, Stored};

impl QueueWorker {
    /// A new holder's file: published where none is; where another file
    /// is published, its settings are kept (the run-time ones go over
    /// them) and the difference is logged loudly.
    pub(super) async fn take_over_file(&mut self) -> Result<(), TickError> {
        let published = self
            .reload
            .publish_file(
                &mut self.conn,
                &self.keys,
                self.lease.owner(),
                &self.own_file,
                FileMoment::TakeOver,
            )
            .await?;
        match published {
            FilePublished::Ours(state) => {
                self.use_base(self.own_file.clone());
                self.note_file(Some(&state.fingerprint));
            }
            FilePublished::Kept(state) => {
                tracing::error!(
                    queue = self.queue(),
                    this_file = self.reload.fingerprint(),
                    published_file = %state.fingerprint,
                    "TAKE-OVER WITH A DIFFERENT CONFIG FILE: this scheduler's file differs from \
                     the one whose settings are published; keeping the published settings and \
                     schedule. To put a file in force, reload (SIGHUP) the lease holder with it"
                );
                self.noted_file = Some(state.fingerprint.clone());
                self.metrics.file_mismatch(self.queue(), true);
                let base = serde_json::from_str::<Settings>(&state.settings_json)
                    .map_err(|e| e.to_string())
                    .and_then(|s| {
                        crate::config::check_settings(&s, self.response_timeout).map(|()| s)
                    });
                match base {
                    Ok(base) => self.use_base(base),
                    Err(e) => tracing::error!(
                        queue = self.queue(),
                        error = %e,
                        "the published file's settings break a rule here; this file's settings are in force"
                    ),
                }
            }
            FilePublished::NotHolder => {}
        }
        Ok(())
    }

    /// A reloaded file: the holder publishes it (it replaces the
    /// published one) with the schedule times it changed.
    pub(super) async fn publish_reloaded_file(&mut self) -> Result<(), TickError> {
        let published = self
            .reload
            .publish_file(
                &mut self.conn,
                &self.keys,
                self.lease.owner(),
                &self.own_file,
                FileMoment::Reload,
            )
            .await?;
        if let FilePublished::Ours(state) = published {
            if state.kept_opening {
                tracing::warn!(
                    queue = self.queue(),
                    "the reloaded file's opening has passed and a later one is published: the published opening is kept"
                );
            }
            self.use_base(self.own_file.clone());
            self.note_file(Some(&state.fingerprint));
        }
        Ok(())
    }

    /// The run-time settings go over `base` from now on.
    pub(super) fn use_base(&mut self, base: Settings) {
        if base == self.file {
            return;
        }
        self.file = base;
        // Read and checked again against the new base at the next read.
        self.runtime = Stored::default();
        let settings = self.file.clone();
        self.reconfigure(settings);
    }

    /// The published file's fingerprint as a lease reply or a publish
    /// showed it: a difference from this process's file is logged loudly
    /// (once per published file) and shown in the metrics.
    pub(super) fn note_file(&mut self, published: Option<&str>) {
        let ours = self.reload.fingerprint();
        let differs = published.is_some_and(|p| p != ours);
        self.metrics.file_mismatch(self.queue(), differs);
        if differs && self.noted_file.as_deref() != published {
            tracing::error!(
                queue = self.queue(),
                this_file = ours,
                published_file = published.unwrap_or_default(),
                "CONFIG FILE DIFFERS from the one whose settings are published: on take-over this \
                 scheduler keeps the published settings and schedule (status shows both fingerprints)"
            );
        }
        self.noted_file = published.map(str::to_string);
    }

    /// Reads the run-time settings and, at a new version, puts them in
    /// force over the file's (a holder publishes them next). Settings
    /// that break a rule with this process's file (another scheduler's
    /// file allowed them) are refused with an error in the log; the
    /// running ones are kept.
    pub(super) async fn load_runtime(&mut self) -> Result<(), TickError> {
        let stored = runtime::read(&mut self.conn, &self.keys).await?;
        if stored.version != self.runtime.version {
            match runtime::effective(&self.file, &stored.values, self.response_timeout) {
                Ok(settings) => {
                    tracing::info!(
                        queue = self.queue(),
                        version = stored.version_number(),
                        set = stored.values.len(),
                        "run-time settings in force"
                    );
                    self.reconfigure(settings);
                    self.runtime_unmarked = stored.version;
                }
                Err(e) => {
                    tracing::error!(
                        queue = self.queue(),
                        version = stored.version_number(),
                        error = %e,
                        "run-time settings refused with this scheduler's config file; running settings kept"
                    );
                    if self.lease.is_held() {
                        runtime::mark_refused(
                            &mut self.conn,
                            &self.keys,
                            stored.version_number(),
                            &e,
                        )
                        .await?;
                    }
                }
            }
        }
        self.runtime = stored;
        Ok(())
    }

    /// The file's settings with `values` over them; the file's alone when
    /// they break a rule with it (logged).
    pub(super) fn over_file(&self, values: &runtime::Values) -> Settings {
        runtime::effective(&self.file, values, self.response_timeout).unwrap_or_else(|e| {
            tracing::error!(
                queue = self.queue(),
                error = %e,
                "run-time settings break a rule with the reloaded config file; the file's settings alone are in force"
            );
            self.file.clone()
        })
    }

    /// New settings from a reloaded config: the rate, the controller's
    /// knobs and the metrics follow at once; the lease is kept, and a
    /// holder publishes them on its next tick.
    pub(super) fn reconfigure(&mut self, settings: Settings) {
        if settings == self.settings {
            return;
        }
        tracing::info!(
            queue = self.queue(),
            admit_rate_per_second = settings.admit_rate_per_second,
            max_active = settings.max_active,
            origin_control = settings.origin_control,
            "settings reloaded"
        );
        self.settings = settings;
        self.steering.retune(&self.settings);
        let rate = self.steering.rate_in_force(&self.settings);
        self.admission.set_rate(rate, self.tick_length());
        self.metrics.settings(self.queue(), &self.settings);
        self.reload.settings_reloaded(self.lease.is_held());
    }

    pub(super) async fn publish(&mut self) -> Result<QueueState, TickError> {
        let state = self
            .reload
            .publish(&mut self.conn, &self.keys, &self.settings)
            .await?;
        if let Some(version) = self.runtime_unmarked.take() {
            runtime::mark_applied(&mut self.conn, &self.keys, version).await?;
        }
        Ok(state)
    }
}
