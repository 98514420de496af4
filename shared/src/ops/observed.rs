//! The state reply that enter and position share, and the position call.

use crate::draw::DrawSlot;
use crate::keys::{QueueKeys, UserId};
use crate::policy::{PollPolicy, PreQueuePolicy};
use crate::records::{admitted_reply, at, pre_queue_reply, waiting_reply, KIND};
use crate::reply::ReplyKind;
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
    /// The visitor's ticket (its score in the line).
    pub ticket: u64,
    /// A kept stock's units left (None: no stock kept; 0: sold out, the
    /// visitor keeps its place and is told so).
    pub stock_left: Option<u64>,
}

/// What Redis knows about a pre-queued user (before a scheduled opening,
/// or while the draw places the pre-queue): no position exists yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreQueueFacts {
    /// Epoch ms of the opening (`None` once the operator cleared it: the
    /// queue opened at once).
    pub opens_at: Option<u64>,
    /// Redis' clock when it answered, epoch ms.
    pub now: u64,
    /// When to poll again around the opening (see
    /// [`PreQueuePolicy`](crate::policy::PreQueuePolicy)).
    pub policy: Option<PreQueuePolicy>,
    /// The visitor's slot in the draw (None for a drawn visitor already
    /// on its ticket while the draw still runs).
    pub slot: Option<DrawSlot>,
    /// The number of the draw the slot belongs to (the seals counted).
    pub draw: Option<u64>,
    /// A kept stock's units left, as in [`WaitingFacts`].
    pub stock_left: Option<u64>,
}

/// A user's state as the enter and position scripts report it: the facts
/// for a waiting or pre-queued user (policy turns them into position, ETA
/// and retryAfter), or any other state as the edge reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    /// In line.
    Waiting(WaitingFacts),
    /// In the pre-queue.
    PreQueue(PreQueueFacts),
    /// Every other state; never [`UserState::Waiting`].
    Settled(UserState),
    /// No place, and the queue's kept stock is gone.
    SoldOut,
}

impl Observed {
    /// Applies the poll/ETA policy. `fallback` serves when no settings have
    /// been published yet; `spread` in `[0, 1)` is this reply's random draw
    /// for spreading a pre-queue's polls after the opening.
    pub fn into_user_state(self, fallback: &Settings, spread: f64) -> UserState {
        match self {
            Observed::PreQueue(p) => {
                let policy = p.policy.unwrap_or_else(|| fallback.pre_queue_policy());
                let opens_at = p.opens_at.unwrap_or(p.now);
                let retry_after_ms = policy.retry_after_ms(opens_at, p.now, spread);
                if p.stock_left == Some(0) {
                    return UserState::SoldOut { retry_after_ms };
                }
                UserState::PreQueue {
                    opens_at,
                    retry_after_ms,
                }
            }
            Observed::Waiting(w) => {
                let policy = w.policy.unwrap_or_else(|| fallback.poll_policy());
                let admitting = w.queue_state.is_none_or(QueueState::admits);
                // Sold out, the place is kept for a restock: the visitor
                // polls as often as its place needs (near the head, to
                // stay alive), and is told so.
                if w.stock_left == Some(0) {
                    return UserState::SoldOut {
                        retry_after_ms: policy.retry_after_ms(w.position, w.measured_rate, false),
                    };
                }
                UserState::Waiting {
                    position: w.position,
                    eta_seconds: policy.eta_seconds(w.position, w.measured_rate, admitting),
                    retry_after_ms: policy.retry_after_ms(w.position, w.measured_rate, admitting),
                    approximate: false,
                }
            }
            Observed::Settled(state) => state,
            Observed::SoldOut => UserState::SoldOut {
                retry_after_ms: fallback.poll_max_ms,
            },
        }
    }

    /// Decodes a `waiting_reply`, `pre_queue_reply` or `settled_state`
    /// reply (lua/prelude.lua).
    /// Returns `Ok(None)` for a kind this decoder does not know, so callers
    /// with extra kinds (enter) can handle them.
    pub(crate) fn decode(f: &Fields) -> Result<Option<Observed>, DecodeError> {
        let text = |p| f.text(at(p)).ok().filter(|t: &&str| !t.is_empty());
        let float = |p| f.opt_f64(at(p));
        Ok(Some(match f.kind(at(KIND))? {
            ReplyKind::Waiting => {
                use waiting_reply as w;
                let policy = match (
                    float(w::ADMIT_RATE),
                    float(w::POLL_MIN_MS),
                    float(w::POLL_MAX_MS),
                ) {
                    (Some(rate), Some(min), Some(max)) => Some(PollPolicy {
                        admit_rate_per_second: rate,
                        poll_min_ms: min as u64,
                        poll_max_ms: max as u64,
                    }),
                    _ => None,
                };
                Observed::Waiting(WaitingFacts {
                    position: f.uint(at(w::POSITION))?,
                    queue_state: text(w::STATE).and_then(QueueState::parse),
                    measured_rate: float(w::MEASURED_RATE),
                    policy,
                    ticket: f.uint(at(w::TICKET))?,
                    stock_left: float(w::STOCK_LEFT).map(|v| v.max(0.0) as u64),
                })
            }
            ReplyKind::PreQueue => {
                use pre_queue_reply as p;
                let policy = match (
                    float(p::POLL_MIN_MS),
                    float(p::POLL_MAX_MS),
                    float(p::OPENING_SPREAD_MS),
                    float(p::ABANDON_AFTER_MS),
                ) {
                    (Some(min), Some(max), Some(spread), Some(abandon)) => Some(PreQueuePolicy {
                        poll_min_ms: min as u64,
                        poll_max_ms: max as u64,
                        opening_spread_ms: spread as u64,
                        abandon_after_ms: abandon as u64,
                    }),
                    _ => None,
                };
                Observed::PreQueue(PreQueueFacts {
                    opens_at: float(p::OPENS_AT).map(|v| v as u64),
                    now: f.uint(at(p::NOW))?,
                    policy,
                    slot: float(p::SLOT).and_then(|score| DrawSlot::from_score(score as u64)),
                    draw: float(p::DRAW_NUMBER).map(|n| n as u64),
                    stock_left: float(p::STOCK_LEFT).map(|v| v.max(0.0) as u64),
                })
            }
            ReplyKind::Admitted => Observed::Settled(UserState::Admitted {
                token: f.text(at(admitted_reply::TOKEN))?.to_string(),
                activate_at: f.uint(at(admitted_reply::ACTIVATE_AT))?,
                expires_at: f.uint(at(admitted_reply::EXPIRES_AT))?,
            }),
            ReplyKind::InFlight => Observed::Settled(UserState::InFlight),
            ReplyKind::Ordered => Observed::Settled(UserState::Ordered),
            ReplyKind::Expired => Observed::Settled(UserState::Expired),
            ReplyKind::Abandoned => Observed::Settled(UserState::Abandoned),
            ReplyKind::Revoked => Observed::Settled(UserState::Revoked),
            ReplyKind::NotInQueue => Observed::Settled(UserState::NotInQueue),
            ReplyKind::SoldOut => Observed::SoldOut,
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

    /// The pre-queue's poll policy these settings imply.
    pub fn pre_queue_policy(&self) -> PreQueuePolicy {
        PreQueuePolicy {
            poll_min_ms: self.poll_min_ms,
            poll_max_ms: self.poll_max_ms,
            opening_spread_ms: self.opening_spread_ms,
            abandon_after_ms: self.abandon_after_ms,
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
                k.pre(),
                k.draw(),
                k.claims(),
                k.stats(),
            ],
            args: vec![self.user.as_str().to_string(), k.base().to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<Observed, DecodeError> {
        let f = Fields::new("position", value)?;
        Observed::decode(&f)?.ok_or_else(|| f.error("unknown state"))
    }
}
