//! Origin control in the tick: once a [`control::STEP`], read the origin's
//! answers (recording the last step's state for a successor), step the AIMD
//! controller ([`crate::control`]) and hand admission the rate in force.

use std::time::{Duration, Instant};

use queuegate_shared::ops::{OriginRead, OriginReply, OriginWindow};
use queuegate_shared::{QueueKeys, Settings};

use crate::connect::RedisConn;
use crate::control::{self, Change, Controller, Knobs};
use crate::engine::{self, EngineError};
use crate::metrics::Metrics;

/// Whether a step is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// Less than a step since the last.
    NotYet,
    /// The first since taking the lease: resume the state in Redis first.
    First,
    /// This long after the last step.
    After(Duration),
}

/// The controller and when it last stepped.
#[derive(Debug)]
pub(super) struct Steering {
    controller: Controller,
    /// When it last stepped (None: not since taking the lease, so the next
    /// step first resumes the state recorded in Redis).
    stepped: Option<Instant>,
}

impl Steering {
    /// At the configured maximum, to resume on the first step.
    pub(super) fn new(settings: &Settings) -> Self {
        Steering {
            controller: Controller::new(Knobs::of(settings)),
            stepped: None,
        }
    }

    /// New settings: the controller's bounds follow.
    pub(super) fn retune(&mut self, settings: &Settings) {
        self.controller.retune(Knobs::of(settings));
    }

    /// A new lease: the next step resumes the last holder's state.
    pub(super) fn restart(&mut self) {
        self.stepped = None;
    }

    /// The admission rate these settings put in force now.
    pub(super) fn rate_in_force(&self, settings: &Settings) -> f64 {
        if settings.origin_control {
            self.controller.target()
        } else {
            settings.admit_rate_per_second
        }
    }

    /// Once a [`control::STEP`]: reads the window and steps. Returns the
    /// rate to admit at from now, `None` to keep the rate (no step due, or
    /// not the holder any more: the admit that follows finds out). Off: the
    /// configured rate, every tick.
    pub(super) async fn steer(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        owner: &str,
        settings: &Settings,
        metrics: &Metrics,
        now: Instant,
    ) -> Result<Option<f64>, EngineError> {
        let queue = keys.queue().as_str();
        if !settings.origin_control {
            let rate = settings.admit_rate_per_second;
            metrics.origin(queue, rate, None, None);
            return Ok(Some(rate));
        }
        let elapsed = match self.due(now) {
            Due::NotYet => return Ok(None),
            Due::First => None,
            Due::After(elapsed) => Some(elapsed),
        };
        let record = elapsed.is_some().then(|| self.controller.record());
        let reply = engine::run(
            conn,
            &OriginWindow {
                keys,
                owner,
                seconds: Knobs::of(settings).window_s,
                record: record.as_ref(),
            },
        )
        .await?;
        let OriginReply::Read(read) = reply else {
            return Ok(None);
        };
        let (from, change) = self.advance(&read, elapsed, now);
        let to = self.controller.target();
        match change {
            Change::Cut { why, .. } if to < from => {
                metrics.rate_cut(queue);
                tracing::warn!(
                    queue,
                    from = format_args!("{from:.1}"),
                    to = format_args!("{to:.1}"),
                    "origin in trouble ({why}): admission rate cut"
                );
            }
            Change::BackToMax => tracing::info!(
                queue,
                rate = settings.admit_rate_per_second,
                "origin healthy: admission back at the full rate"
            ),
            _ => {}
        }
        metrics.origin(
            queue,
            to,
            self.controller.error_share(),
            self.controller.p95_ms(),
        );
        Ok(Some(to))
    }

    fn due(&self, now: Instant) -> Due {
        match self.stepped {
            None => Due::First,
            Some(t) if now.duration_since(t) < control::STEP => Due::NotYet,
            Some(t) => Due::After(now.duration_since(t)),
        }
    }

    /// One step over `read` at `now`, `elapsed` after the last (`None`:
    /// the first of this lease, which resumes the recorded state). Returns
    /// the target before the step and what the step did.
    fn advance(
        &mut self,
        read: &OriginRead,
        elapsed: Option<Duration>,
        now: Instant,
    ) -> (f64, Change) {
        if elapsed.is_none() {
            // A new lease: carry on from the state the last holder recorded.
            self.controller.resume(read);
        }
        self.stepped = Some(now);
        let from = self.controller.target();
        (
            from,
            self.controller.step(read, elapsed.unwrap_or(control::STEP)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::ops::Answers;

    fn settings() -> Settings {
        Settings {
            origin_control: true,
            admit_rate_per_second: 100.0,
            min_admit_rate_per_second: 10.0,
            origin_min_samples: 10,
            ..Settings::default()
        }
    }

    /// `n` seconds up to `now`, 20 answers each, `failed` of them 5xx.
    fn read(now: u64, failed: u64, recorded: Option<f64>) -> OriginRead {
        let a = Answers {
            ok: 20 - failed,
            server_errors: failed,
            ..Answers::default()
        };
        OriginRead {
            now_second: now,
            target_rate: recorded,
            cut_at: None,
            seconds: vec![a; 10],
        }
    }

    #[test]
    fn steps_are_due_once_a_step_and_first_after_a_new_lease() {
        let mut s = Steering::new(&settings());
        let t0 = Instant::now();
        assert_eq!(s.due(t0), Due::First);
        s.advance(&read(100, 0, None), None, t0);
        assert_eq!(s.due(t0 + control::STEP / 2), Due::NotYet);
        assert_eq!(s.due(t0 + control::STEP * 3), Due::After(control::STEP * 3));
        s.restart();
        assert_eq!(s.due(t0 + control::STEP / 2), Due::First);
    }

    #[test]
    fn the_first_step_resumes_the_recorded_rate_and_later_ones_do_not() {
        let mut s = Steering::new(&settings());
        let t0 = Instant::now();
        let (from, change) = s.advance(&read(100, 0, Some(40.0)), None, t0);
        assert_eq!(from, 40.0, "resumed before stepping");
        assert_eq!(change, Change::Raised);
        let resumed = s.controller.target();
        assert!(resumed > 40.0 && resumed < 100.0, "{resumed}");
        // A later step ignores what Redis recorded (it is our own record).
        let later = t0 + control::STEP;
        s.advance(&read(101, 0, Some(12.0)), Some(control::STEP), later);
        assert!(s.controller.target() > resumed);
    }

    #[test]
    fn the_rate_in_force_is_the_controllers_only_under_origin_control() {
        let mut s = Steering::new(&settings());
        let (from, change) = s.advance(&read(100, 20, None), None, Instant::now());
        assert!(matches!(change, Change::Cut { .. }), "{change:?}");
        assert_eq!((from, s.controller.target()), (100.0, 50.0));
        assert_eq!(s.rate_in_force(&settings()), 50.0);
        let off = Settings {
            origin_control: false,
            ..settings()
        };
        assert_eq!(s.rate_in_force(&off), 100.0);
    }
}
