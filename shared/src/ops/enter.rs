//! `enter`: take a ticket, or report the place or token the user has.

use super::observed::Observed;
use crate::fields::stats;
use crate::guard::{EntryGuard, GuardCheck};
use crate::keys::{QueueKeys, UserId};
use crate::reply::ReplyKind;
use crate::script::{Invocation, Operation, ENTER};
use crate::settings::QueueState;
use crate::token::EntryToken;
use crate::value::{DecodeError, Fields, Value};

/// Enter a queue.
#[derive(Debug, Clone, Copy)]
pub struct Enter<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The user.
    pub user: &'a UserId,
    /// What a new place must pass (a visitor holding one passes freely).
    pub guard: EntryGuard<'a>,
    /// A fresh token for idle passthrough: while nobody waits and a slot
    /// and the rate allow, the visitor is admitted at once with it. `None`
    /// always takes a place.
    pub token: Option<&'a EntryToken>,
}

/// The outcome of an enter.
#[derive(Debug, Clone, PartialEq)]
pub enum EnterReply {
    /// In line (new or kept ticket), or already admitted / in flight.
    Entered(Observed),
    /// The queue's kept stock is gone: no new place.
    SoldOut,
    /// The line is at its maximum size.
    Full {
        /// Users waiting now.
        waiting: u64,
        /// The configured maximum.
        max_waiting: u64,
    },
    /// Not accepting entries: closed or draining, or `None` when no
    /// scheduler has published settings for this queue yet.
    Closed(Option<QueueState>),
    /// A new place was refused by the entry guard; only the refusal's
    /// stats counter was written.
    Refused(Refusal),
}

/// Why the entry guard refused a new place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A required check was not passed.
    Missing(GuardCheck),
    /// The client address spent its budget; it may try again after this.
    TooManyEntries {
        /// Milliseconds until the budget holds a place again.
        retry_after_ms: u64,
    },
    /// The proof-of-work solution was used before.
    SolutionReused,
    /// The solution's difficulty level is below the one now in force (the
    /// line grew while it was solved): solve a new challenge.
    SolutionStale,
    /// The client's address group holds `entry_places_per_address` live
    /// places already (pre-queued, being drawn, waiting or holding a
    /// claim).
    AddressFull {
        /// The cap in force.
        cap: u64,
    },
}

impl Operation for Enter<'_> {
    type Reply = EnterReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let wider = self
            .guard
            .address
            .and_then(|a| a.wider())
            .unwrap_or_default();
        Invocation {
            script: &ENTER,
            keys: vec![
                k.waiting(),
                k.seq(),
                k.token(self.user),
                k.status(self.user),
                k.active(),
                k.config(),
                k.stats(),
                k.guard(),
                k.pre(),
                k.draw(),
                k.groups(),
                k.claims(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                k.base().to_string(),
                self.guard
                    .address
                    .map(|a| a.as_str().to_string())
                    .unwrap_or_default(),
                self.guard
                    .solution
                    .map(|v| v.challenge.clone())
                    .unwrap_or_default(),
                self.guard
                    .solution
                    .map(|v| v.expires_at_ms.to_string())
                    .unwrap_or_default(),
                self.guard
                    .missing
                    .map(wire_name)
                    .unwrap_or_default()
                    .to_string(),
                self.token
                    .map(|t| t.expose().to_string())
                    .unwrap_or_default(),
                self.guard
                    .solution
                    .map(|v| v.level.to_string())
                    .unwrap_or_default(),
                wider.0,
                wider.1,
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<EnterReply, DecodeError> {
        let f = Fields::new("enter", value)?;
        match Observed::decode(&f)? {
            // No place was taken: a refusal, not an entry.
            Some(Observed::SoldOut) => return Ok(EnterReply::SoldOut),
            Some(observed) => return Ok(EnterReply::Entered(observed)),
            None => {}
        }
        match f.kind(0)? {
            ReplyKind::Full => Ok(EnterReply::Full {
                waiting: f.uint(1)?,
                max_waiting: f.uint(2)?,
            }),
            ReplyKind::Closed => Ok(EnterReply::Closed(QueueState::parse(f.text(1)?))),
            ReplyKind::Unconfigured => Ok(EnterReply::Closed(None)),
            ReplyKind::Guard => {
                let name = f.text(1)?;
                check_named(name)
                    .map(|g| EnterReply::Refused(Refusal::Missing(g)))
                    .ok_or_else(|| f.error(format!("unknown guard {name:?}")))
            }
            ReplyKind::TooMany => Ok(EnterReply::Refused(Refusal::TooManyEntries {
                retry_after_ms: f.uint(1)?,
            })),
            ReplyKind::Reused => Ok(EnterReply::Refused(Refusal::SolutionReused)),
            ReplyKind::Stale => Ok(EnterReply::Refused(Refusal::SolutionStale)),
            ReplyKind::AddressFull => Ok(EnterReply::Refused(Refusal::AddressFull {
                cap: f.uint(1)?,
            })),
            other => Err(f.unexpected(other)),
        }
    }
}

/// A missing check's name on the wire to the `enter` script and back
/// (ARGV[6], `{'guard', name}`). The script counts the refusal under the
/// stats field of that name, so the name is that counter's
/// ([`stats`]); this is the one place that says so.
fn wire_name(check: GuardCheck) -> &'static str {
    match check {
        GuardCheck::Challenge => stats::REFUSED_CHALLENGE,
        GuardCheck::Turnstile => stats::REFUSED_TURNSTILE,
    }
}

/// The check a wire name stands for.
fn check_named(name: &str) -> Option<GuardCheck> {
    GuardCheck::ALL.into_iter().find(|g| wire_name(*g) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_round_trip_through_their_wire_names() {
        for g in GuardCheck::ALL {
            assert_eq!(check_named(wire_name(g)), Some(g));
        }
        assert_eq!(check_named("entered"), None);
    }
}
