//! What settings may be: every rule a value must keep for the queue's
//! guarantees to hold, with the error that names the setting.

use super::*;

/// A setting that cannot work, with what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// A value outside its range.
    #[error("{field} = {value}: {rule}")]
    Invalid {
        field: &'static str,
        value: String,
        rule: &'static str,
    },
    /// The config hash holds something that is not a setting value.
    #[error("config field {field} = {value:?} is not valid: {why}")]
    Stored {
        field: String,
        value: String,
        why: String,
    },
}

fn invalid(field: &'static str, value: impl ToString, rule: &'static str) -> SettingsError {
    SettingsError::Invalid {
        field,
        value: value.to_string(),
        rule,
    }
}

impl Settings {
    /// Rejects settings that would break the queue's guarantees.
    pub fn validate(&self) -> Result<(), SettingsError> {
        if !(10..=10_000).contains(&self.tick_ms) {
            return Err(invalid("tick_ms", self.tick_ms, "must be 10 to 10000"));
        }
        let rate = self.admit_rate_per_second;
        if !(rate.is_finite() && rate > 0.0 && rate <= 100_000.0) {
            return Err(invalid(
                "admit_rate_per_second",
                rate,
                "must be above 0 and at most 100000",
            ));
        }
        if self.max_active == 0 {
            return Err(invalid("max_active", self.max_active, "must be at least 1"));
        }
        if self.max_waiting == 0 {
            return Err(invalid("max_waiting", 0, "must be at least 1"));
        }
        if self.token_ttl_ms < 1_000 {
            return Err(invalid(
                "token_ttl_ms",
                self.token_ttl_ms,
                "must be at least 1000",
            ));
        }
        if !SESSION_MS_RANGE.contains(&self.session_ms) {
            return Err(invalid(
                "session_ms",
                self.session_ms,
                "must be from 60000 (a minute) to 1800000 (half an hour)",
            ));
        }
        if self.activation_jitter_ms >= self.token_ttl_ms {
            return Err(invalid(
                "activation_jitter_ms",
                self.activation_jitter_ms,
                "must be below token_ttl_ms",
            ));
        }
        if self.status_ttl_ms <= self.token_ttl_ms + self.activation_jitter_ms {
            return Err(invalid(
                "status_ttl_ms",
                self.status_ttl_ms,
                "must exceed token_ttl_ms + activation_jitter_ms, so an unused token reads as expired",
            ));
        }
        if self.poll_min_ms == 0 || self.poll_min_ms > self.poll_max_ms {
            return Err(invalid(
                "poll_min_ms",
                self.poll_min_ms,
                "must be at least 1 and at most poll_max_ms",
            ));
        }
        if self.abandon_after_ms < 2 * self.poll_max_ms {
            return Err(invalid(
                "abandon_after_ms",
                self.abandon_after_ms,
                "must be at least 2 × poll_max_ms, or visitors who obey retryAfter are dropped",
            ));
        }
        if self.sleep_grace_ms > MAX_SLEEP_GRACE_MS {
            return Err(invalid(
                "sleep_grace_ms",
                self.sleep_grace_ms,
                "must be at most 1800000 (30 minutes); at least abandon_after_ms is used",
            ));
        }
        if self.exact_head_ms > MAX_EXACT_ZONE_MS {
            return Err(invalid(
                "exact_head_ms",
                self.exact_head_ms,
                "must be at most 86400000 (a day)",
            ));
        }
        if self.exact_zone_ms > MAX_EXACT_ZONE_MS {
            return Err(invalid(
                "exact_zone_ms",
                self.exact_zone_ms,
                "must be at most 86400000 (a day)",
            ));
        }
        if self.in_flight_ms < 1_000 || self.in_flight_ms >= self.status_ttl_ms {
            return Err(invalid(
                "in_flight_ms",
                self.in_flight_ms,
                "must be at least 1000 and below status_ttl_ms",
            ));
        }
        if self.retry_window_ms >= self.status_ttl_ms {
            return Err(invalid(
                "retry_window_ms",
                self.retry_window_ms,
                "must be below status_ttl_ms",
            ));
        }
        if self.lease_ttl_ms < 3 * self.tick_ms {
            return Err(invalid(
                "lease_ttl_ms",
                self.lease_ttl_ms,
                "must be at least 3 × tick_ms, so a slow tick does not lose the lease",
            ));
        }
        if !(1..=5_000).contains(&self.sweep_limit) {
            return Err(invalid(
                "sweep_limit",
                self.sweep_limit,
                "must be 1 to 5000",
            ));
        }
        if self.entry_budget_per_minute > 0 && self.entry_budget_burst == 0 {
            return Err(invalid(
                "entry_budget_burst",
                self.entry_budget_burst,
                "must be at least 1 while entry_budget_per_minute is on",
            ));
        }
        if self.entry_places_per_address > MAX_PLACES_PER_ADDRESS {
            return Err(invalid(
                "entry_places_per_address",
                self.entry_places_per_address,
                "must be 0 (off) to 50: the enter script checks each of an address's places",
            ));
        }
        if !(1_000..=100_000_000).contains(&self.challenge_max_number) {
            return Err(invalid(
                "challenge_max_number",
                self.challenge_max_number,
                "must be 1000 to 100000000",
            ));
        }
        if self.challenge_crowd == 0 {
            return Err(invalid("challenge_crowd", 0, "must be at least 1"));
        }
        if !(10_000..=120_000).contains(&self.challenge_ttl_ms) {
            return Err(invalid(
                "challenge_ttl_ms",
                self.challenge_ttl_ms,
                "must be 10000 to 120000 (a challenge lives at most 2 minutes)",
            ));
        }
        if self.opening_spread_ms > 600_000 {
            return Err(invalid(
                "opening_spread_ms",
                self.opening_spread_ms,
                "must be at most 600000",
            ));
        }
        if !(1..=5_000).contains(&self.draw_batch) {
            return Err(invalid("draw_batch", self.draw_batch, "must be 1 to 5000"));
        }
        self.validate_origin_control()
    }

    fn validate_origin_control(&self) -> Result<(), SettingsError> {
        let min = self.min_admit_rate_per_second;
        if !(min.is_finite() && min > 0.0 && min <= self.admit_rate_per_second) {
            return Err(invalid(
                "min_admit_rate_per_second",
                min,
                "must be above 0 and at most admit_rate_per_second",
            ));
        }
        if !(1_000..=60_000).contains(&self.origin_window_ms) {
            return Err(invalid(
                "origin_window_ms",
                self.origin_window_ms,
                "must be 1000 to 60000 (the edge keeps 65 s of answers)",
            ));
        }
        if self.origin_min_samples == 0 {
            return Err(invalid("origin_min_samples", 0, "must be at least 1"));
        }
        let share = self.origin_max_error_share;
        if !(share > 0.0 && share < 1.0) {
            return Err(invalid(
                "origin_max_error_share",
                share,
                "must be above 0 and below 1",
            ));
        }
        if !(50..=60_000).contains(&self.origin_p95_target_ms) {
            return Err(invalid(
                "origin_p95_target_ms",
                self.origin_p95_target_ms,
                "must be 50 to 60000",
            ));
        }
        let factor = self.origin_decrease_factor;
        if !(0.05..=0.95).contains(&factor) {
            return Err(invalid(
                "origin_decrease_factor",
                factor,
                "must be 0.05 to 0.95",
            ));
        }
        if !(1_000..=3_600_000).contains(&self.origin_recover_ms) {
            return Err(invalid(
                "origin_recover_ms",
                self.origin_recover_ms,
                "must be 1000 to 3600000",
            ));
        }
        Ok(())
    }
}
