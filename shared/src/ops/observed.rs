//! The state reply that enter and position share, and the position call.

use crate::keys::{QueueKeys, UserId};
use crate::policy::PollPolicy;
use crate::script::{Invocation, Operation, POSITION};
use crate::settings::{QueueState, Settings};
use crate::state::UserState;
use crate::value::{DecodeError, Fields, Value};

/// What Redis knows about a waiting user, before policy is applied.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingFacts {
    /// 1-based position.
    pub position: u64,
    /// The operator's queue state (None before settings are published).
    pub queue_state: Option<QueueState>,
    /// The scheduler's measured admissions per second, if any.
    pub measured_rate: Option<f64>,
    /// Poll policy from the published settings (None before publishing).
    pub policy: Option<PollPolicy>,
}

/// A user's state as the enter and position scripts report it: the facts
/// for a waiting user (policy turns them into position, ETA and
/// retryAfter), or any other state as the edge reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// In line.
    Waiting(WaitingFacts),
    /// Every other state; never [`UserState::Waiting`].
    Settled(UserState),
}

impl Observed {
    /// Applies the poll/ETA policy. `fallback` serves when no settings have
    /// been published yet.
    pub fn into_user_state(self, fallback: &PollPolicy) -> UserState {
        match self {
            Observed::Waiting(w) => {
                let policy = w.policy.unwrap_or(*fallback);
                let admitting = w.queue_state.is_none_or(QueueState::admits);
                UserState::Waiting {
                    position: w.position,
                    eta_seconds: policy.eta_seconds(w.position, w.measured_rate, admitting),
                    retry_after_ms: policy.retry_after_ms(w.position, w.measured_rate, admitting),
                }
            }
            Observed::Settled(state) => state,
        }
    }

    /// Decodes a `waiting_reply` or `settled_state` reply (lua/prelude.lua).
    /// Returns `Ok(None)` for a kind this decoder does not know, so callers
    /// with extra kinds (enter) can handle them.
    pub(crate) fn decode(f: &Fields) -> Result<Option<Observed>, DecodeError> {
        Ok(Some(match f.text(0)? {
            "waiting" => {
                let text = |i| f.text(i).ok().filter(|t: &&str| !t.is_empty());
                let policy = match (f.opt_f64(4), f.opt_f64(5), f.opt_f64(6)) {
                    (Some(rate), Some(min), Some(max)) => Some(PollPolicy {
                        admit_rate_per_second: rate,
                        poll_min_ms: min as u64,
                        poll_max_ms: max as u64,
                    }),
                    _ => None,
                };
                Observed::Waiting(WaitingFacts {
                    position: f.uint(1)?,
                    queue_state: text(2).and_then(QueueState::parse),
                    measured_rate: f.opt_f64(3),
                    policy,
                })
            }
            "admitted" => Observed::Settled(UserState::Admitted {
                token: f.text(1)?.to_string(),
                activate_at: f.uint(2)?,
                expires_at: f.uint(3)?,
            }),
            "in_flight" => Observed::Settled(UserState::InFlight),
            "ordered" => Observed::Settled(UserState::Ordered),
            "expired" => Observed::Settled(UserState::Expired),
            "abandoned" => Observed::Settled(UserState::Abandoned),
            "not_in_queue" => Observed::Settled(UserState::NotInQueue),
            _ => return Ok(None),
        }))
    }
}

impl Settings {
    /// The poll/ETA policy these settings imply.
    pub fn poll_policy(&self) -> PollPolicy {
        PollPolicy {
            admit_rate_per_second: self.admit_rate_per_second,
            poll_min_ms: self.poll_min_ms,
            poll_max_ms: self.poll_max_ms,
        }
    }
}

/// `position`: the user's state; marks a waiting user as seen.
#[derive(Debug, Clone, Copy)]
pub struct Position<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The user.
    pub user: &'a UserId,
}

impl Operation for Position<'_> {
    type Reply = Observed;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &POSITION,
            keys: vec![
                k.waiting(),
                k.token(self.user),
                k.status(self.user),
                k.config(),
            ],
            args: vec![self.user.as_str().to_string(), k.base().to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<Observed, DecodeError> {
        let f = Fields::new("position", value)?;
        Observed::decode(&f)?.ok_or_else(|| f.error("unknown state"))
    }
}
