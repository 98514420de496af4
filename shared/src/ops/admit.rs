//! `admit`: one scheduler tick for one queue.

use crate::keys::QueueKeys;
use crate::records::{admit_arg, admit_reply, at};
use crate::script::{Invocation, Operation, ADMIT};
use crate::settings::Settings;
use crate::token::Grant;
use crate::value::{DecodeError, Fields, Value};

/// One admission tick. At most `min(allowance, grants.len())` users are
/// admitted, never more than the free slots nor than the shared rate
/// bucket holds. The caller's lease is
/// extended by `settings.lease_ttl_ms` in the same call, so a tick is one
/// round trip.
#[derive(Debug, Clone, Copy)]
pub struct Admit<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The caller's lease owner id (fencing).
    pub owner: &'a str,
    /// The most admissions this tick may make: the scheduler asks for
    /// what the shared rate bucket can hold ([`rate_bucket_cap`]), which is
    /// the rate limit.
    pub allowance: u64,
    /// The queue's settings (slots, TTLs, abandon timeout, sweep limit,
    /// lease TTL).
    pub settings: &'a Settings,
    /// The measured admission rate to record for the ETA, if any.
    pub rate_estimate: Option<f64>,
    /// The admissions per second in force (origin control's target, or
    /// the configured rate): the rate bucket shared with idle passthrough
    /// refills at it.
    pub rate_in_force: f64,
    /// Tokens and jitter, one per possible admission.
    pub grants: &'a [Grant],
    /// The caller waits for a wake-up while the queue is idle: a tick that
    /// leaves it idle extends the lease by the idle TTL
    /// ([`Settings::idle_lease_ttl_ms`]) instead of `lease_ttl_ms`.
    pub idle_lease: bool,
}

/// What a tick did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdmitCounts {
    /// False when the queue is paused or closed (sweeps still ran).
    pub admitting: bool,
    /// Users given a token.
    pub admitted: u64,
    /// Slots freed from unused tokens.
    pub expired: u64,
    /// Slots freed from consumes the origin never settled.
    pub lapsed: u64,
    /// Leavers dropped from the line, and claims whose grace ran out.
    pub abandoned: u64,
    /// Users still waiting.
    pub waiting: u64,
    /// Slots in use after the tick.
    pub active: u64,
    /// Entries the edge refused so far (totals, not this tick's).
    pub refused: Refused,
    /// Visitors in the pre-queue.
    pub pre_queued: u64,
    /// A draw is placing a pre-queue: nobody was admitted.
    pub drawing: bool,
    /// Requests bypass links passed so far (a total, as `refused`).
    pub bypassed: u64,
    /// Visitors operators revoked so far (a total).
    pub revoked: u64,
    /// The run-time settings' version (0: none were ever set).
    pub settings_version: u64,
    /// Visitors passed over at the head this tick, asleep within their
    /// sleep grace (each now holds a claim).
    pub claimed: u64,
    /// Claims held after the tick.
    pub claims: u64,
    /// A kept stock's units left (None: no stock kept).
    pub stock_left: Option<u64>,
    /// A kept stock's units sold.
    pub stock_sold: u64,
    /// The overbooking margin in force, per mille.
    pub stock_margin: u64,
}

/// Totals of new places the entry guard refused, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Refused {
    /// The address spent its budget.
    pub budget: u64,
    /// No proof-of-work solution.
    pub challenge: u64,
    /// A solution used before.
    pub reused: u64,
    /// No valid Turnstile token.
    pub turnstile: u64,
    /// A solution of a lower difficulty level than the one in force.
    pub stale: u64,
    /// The address group held `entry_places_per_address` live places.
    pub address_full: u64,
}

impl Refused {
    /// Each reason with its total, named as in the metrics.
    pub fn by_reason(&self) -> [(&'static str, u64); 6] {
        [
            ("budget", self.budget),
            ("challenge", self.challenge),
            ("reused", self.reused),
            ("stale", self.stale),
            ("turnstile", self.turnstile),
            ("address_full", self.address_full),
        ]
    }
}

/// The outcome of a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmitReply {
    /// The caller does not hold the lease; nothing changed (and the lease
    /// was not extended).
    NotOwner,
    /// The tick ran.
    Ran(AdmitCounts),
}

/// How many ticks' worth the shared rate bucket (`stats.rate_bucket`, the
/// one admission limiter: admit ticks and idle passthrough spend from it)
/// holds at most: a tick up to a whole tick late loses nothing, and a stall
/// cannot build a burst. The scripts' header carries it as
/// `RATE_BUCKET_TICKS` (the prelude's `rate_tokens`).
pub const RATE_BUCKET_TICKS: u64 = 2;

/// The most tokens the shared rate bucket holds at `rate_per_second` with
/// a `tick_ms` tick, at least one: the most one tick can admit. The same
/// expression as the prelude's `rate_tokens`, in the same order (so the
/// same double).
pub fn rate_bucket_cap(rate_per_second: f64, tick_ms: u64) -> f64 {
    (RATE_BUCKET_TICKS as f64 * rate_per_second * tick_ms as f64 / 1000.0).max(1.0)
}

/// A rate as the script records it (`rate_now`): stable text, so an
/// unchanged rate is not rewritten each tick.
fn rate_arg(rate: f64) -> String {
    if rate.is_finite() && rate > 0.0 {
        format!("{rate:.3}")
    } else {
        "0".into()
    }
}

impl Operation for Admit<'_> {
    type Reply = AdmitReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let s = self.settings;
        let mut args = vec![String::new(); admit_arg::GRANTS - 1];
        let mut set = |position: usize, value: String| args[at(position)] = value;
        set(admit_arg::OWNER, self.owner.to_string());
        set(admit_arg::BASE, k.base().to_string());
        set(admit_arg::ALLOWANCE, self.allowance.to_string());
        set(admit_arg::MAX_ACTIVE, s.max_active.to_string());
        set(admit_arg::TOKEN_TTL_MS, s.token_ttl_ms.to_string());
        set(admit_arg::STATUS_TTL_MS, s.status_ttl_ms.to_string());
        set(admit_arg::ABANDON_AFTER_MS, s.abandon_after_ms.to_string());
        set(admit_arg::SLEEP_GRACE_MS, s.sleep_grace().to_string());
        set(admit_arg::SWEEP_LIMIT, s.sweep_limit.to_string());
        set(admit_arg::LEAVER_SCAN, s.leaver_scan_per_tick.to_string());
        set(
            admit_arg::MEASURED_RATE,
            self.rate_estimate
                .filter(|r| r.is_finite() && *r >= 0.0)
                .map(|r| format!("{r:.3}"))
                .unwrap_or_default(),
        );
        set(admit_arg::LEASE_TTL_MS, s.lease_ttl_ms.to_string());
        set(
            admit_arg::BUDGET_PER_MINUTE,
            s.entry_budget_per_minute.to_string(),
        );
        set(admit_arg::BUDGET_BURST, s.entry_budget_burst.to_string());
        set(admit_arg::RATE, rate_arg(self.rate_in_force));
        set(admit_arg::TICK_MS, s.tick_ms.to_string());
        set(
            admit_arg::NEAR_ZONE,
            s.near_zone_visitors(self.rate_in_force).to_string(),
        );
        set(
            admit_arg::EXACT_HEAD,
            s.exact_head_visitors(self.rate_in_force).to_string(),
        );
        if self.idle_lease {
            set(
                admit_arg::IDLE_LEASE_TTL_MS,
                s.idle_lease_ttl_ms().to_string(),
            );
        }
        let n = self
            .grants
            .len()
            .min(usize::try_from(self.allowance).unwrap_or(usize::MAX));
        for g in &self.grants[..n] {
            args.push(g.token.expose().to_string());
            args.push(g.jitter_ms.to_string());
        }
        Invocation {
            script: &ADMIT,
            keys: vec![
                k.waiting(),
                k.active(),
                k.lock(),
                k.config(),
                k.stats(),
                k.guard(),
                k.pre(),
                k.claims(),
                k.stock_held(),
            ],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<AdmitReply, DecodeError> {
        use admit_reply as r;
        let f = Fields::new("admit", value)?;
        if f.len() != r::LEN {
            return Err(f.error(format!("expected {} fields, got {}", r::LEN, f.len())));
        }
        let field = |position: usize| f.uint(at(position));
        let code = f.int(at(r::CODE))?;
        let counts = AdmitCounts {
            admitting: code == 1,
            admitted: field(r::ADMITTED)?,
            expired: field(r::EXPIRED)?,
            lapsed: field(r::LAPSED)?,
            abandoned: field(r::ABANDONED)?,
            waiting: field(r::WAITING)?,
            active: field(r::ACTIVE)?,
            refused: Refused {
                budget: field(r::REFUSED_BUDGET)?,
                challenge: field(r::REFUSED_CHALLENGE)?,
                reused: field(r::REFUSED_REUSED)?,
                turnstile: field(r::REFUSED_TURNSTILE)?,
                stale: field(r::REFUSED_STALE)?,
                address_full: field(r::REFUSED_ADDRESS_FULL)?,
            },
            pre_queued: field(r::PRE_QUEUED)?,
            drawing: code == 3,
            bypassed: field(r::BYPASSED)?,
            revoked: field(r::REVOKED)?,
            settings_version: field(r::SETTINGS_VERSION)?,
            claimed: field(r::CLAIMED)?,
            claims: field(r::CLAIMS)?,
            stock_left: u64::try_from(f.int(at(r::STOCK_LEFT))?).ok(),
            stock_sold: field(r::STOCK_SOLD)?,
            stock_margin: field(r::STOCK_MARGIN)?,
        };
        match code {
            0 => Ok(AdmitReply::NotOwner),
            1..=3 => Ok(AdmitReply::Ran(counts)),
            code => Err(f.error(format!("unknown code {code}"))),
        }
    }
}
