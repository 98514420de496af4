//! `schedule`: set or clear a queue's opening and closing (RFC 3339 times
//! with an offset), checked before Redis is asked; with the opening, the
//! randomness beacon round its draw mixes in (`--beacon drand`), named
//! before anything changes.

use queuegate_shared::beacon::BeaconRound;
use queuegate_shared::fields::config as cf;
use queuegate_shared::ops::{self, Change};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError};
use crate::beacon;
use crate::config::{self, Config};
use crate::connect::RedisConn;
use crate::engine;

/// How the caller names the schedule's inputs: the CLI's flags, or the
/// API's JSON fields (errors name them as the caller wrote them).
pub type Names = [&'static str; 4];
/// The CLI's flags.
pub const FLAGS: Names = ["--opens-at", "--closes-at", "--clear", "--beacon"];
/// The API's fields.
pub const FIELDS: Names = ["opens_at", "closes_at", "clear", "beacon"];

/// The beacons `--beacon` knows: drand, at the config's `[beacon]`.
pub const BEACONS: [&str; 1] = ["drand"];

/// Change a queue's scheduled opening and closing.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// The opening asked for (RFC 3339), if any.
    pub opens_at: Option<String>,
    /// The closing asked for (RFC 3339), if any.
    pub closes_at: Option<String>,
    /// Remove both instead.
    pub clear: bool,
    /// The randomness beacon the opening's draw mixes in (`drand`), if any;
    /// needs an opening. An opening set without one names none.
    pub beacon: Option<String>,
    /// How the caller names these inputs.
    pub names: Names,
}

/// A queue's schedule after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScheduleNow {
    /// The queue.
    pub queue: String,
    /// When it opens (RFC 3339), if scheduled.
    pub opens_at: Option<String>,
    /// When it stops taking visitors, if scheduled.
    pub closes_at: Option<String>,
    /// Set when the schedule cannot admit anybody (closes before it opens).
    pub warning: Option<String>,
    /// The beacon round named for the opening's draw, when one was.
    pub beacon: Option<BeaconRound>,
}

impl Schedule {
    /// The opening and closing asked for (or `clear` for neither), checked:
    /// times with an offset, something to change, a closing after the
    /// opening.
    pub fn change(&self) -> Result<(Change, Change), ActionError> {
        let [open_name, close_name, clear_name, beacon_name] = self.names;
        let (opens_at, closes_at) = (self.opens_at.as_deref(), self.closes_at.as_deref());
        if let Some(b) = self.beacon.as_deref() {
            if opens_at.is_none() || self.clear {
                return Err(ActionError::BadInput(format!(
                    "{beacon_name} names a round after the opening: give {open_name} with it"
                )));
            }
            if !BEACONS.contains(&b) {
                return Err(ActionError::BadInput(format!(
                    "{beacon_name} {b:?}: not a beacon this scheduler knows (known: {})",
                    BEACONS.join(", ")
                )));
            }
        }
        if self.clear {
            if opens_at.is_some() || closes_at.is_some() {
                return Err(ActionError::BadInput(format!(
                    "{clear_name} takes no {open_name} or {close_name}"
                )));
            }
            return Ok((Change::Clear, Change::Clear));
        }
        let time = |t: Option<&str>, name: &str| -> Result<Change, ActionError> {
            t.map_or(Ok(Change::Keep), |t| {
                config::parse_time(t)
                    .map(Change::Set)
                    .map_err(|e| ActionError::BadInput(format!("{name}: {e}")))
            })
        };
        let change = (time(opens_at, open_name)?, time(closes_at, close_name)?);
        match change {
            (Change::Keep, Change::Keep) => Err(ActionError::BadInput(format!(
                "give {open_name}, {close_name} or {clear_name}"
            ))),
            (Change::Set(open), Change::Set(close)) if close <= open => Err(ActionError::Conflict(
                format!("{close_name} must be after {open_name}"),
            )),
            _ => Ok(change),
        }
    }

    /// Changes the queue's scheduled opening and closing.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<ScheduleNow, ActionError> {
        let (opens_at, closes_at) = self.change()?;
        let q = pick(config, self.queue.as_deref())?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let named = self.beacon_round(config, opens_at).await?;
        // The round goes with the opening: set with it, gone with another
        // opening or a cleared one (the next commitment takes it along).
        match (&opens_at, &named) {
            (Change::Set(_), Some(round)) => {
                let json = serde_json::to_string(round).unwrap_or_default();
                redis::cmd("HSET")
                    .arg(keys.config())
                    .arg(cf::DRAW_BEACON)
                    .arg(json)
                    .exec_async(conn)
                    .await?;
            }
            (Change::Set(_) | Change::Clear, None) => {
                redis::cmd("HDEL")
                    .arg(keys.config())
                    .arg(cf::DRAW_BEACON)
                    .exec_async(conn)
                    .await?;
            }
            _ => {}
        }
        let now = engine::run(
            conn,
            &ops::Schedule {
                keys: &keys,
                opens_at,
                closes_at,
            },
        )
        .await?;
        let warning = match (now.opens_at, now.closes_at) {
            (Some(open), Some(close)) if close <= open => {
                Some("the queue closes before it opens; nobody can enter".to_string())
            }
            _ => None,
        };
        Ok(ScheduleNow {
            queue: q.id.to_string(),
            opens_at: now.opens_at.map(config::format_time),
            closes_at: now.closes_at.map(config::format_time),
            warning,
            beacon: named,
        })
    }

    /// The beacon round named for the opening `opens_at`, read from the
    /// beacon's `info` before anything changes; None when none is asked.
    async fn beacon_round(
        &self,
        config: &Config,
        opens_at: Change,
    ) -> Result<Option<BeaconRound>, ActionError> {
        let beacon_name = self.names[3];
        let (Some(_), Change::Set(at)) = (&self.beacon, opens_at) else {
            return Ok(None);
        };
        let Some(drand) = &config.beacon else {
            return Err(ActionError::BadInput(format!(
                "{beacon_name} drand: the config has no [beacon] (url, chain_hash); nothing changed"
            )));
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        if at <= now {
            return Err(ActionError::Conflict(format!(
                "{beacon_name}: the opening has passed, so a round after it may be out already; nothing changed"
            )));
        }
        beacon::round_for(drand, at).await.map(Some).map_err(|e| {
            ActionError::Refused(format!(
                "{beacon_name}: cannot read the beacon's chain info: {e}; nothing changed"
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(
        opens_at: Option<&str>,
        closes_at: Option<&str>,
        clear: bool,
    ) -> Result<(Change, Change), ActionError> {
        Schedule {
            queue: None,
            opens_at: opens_at.map(str::to_string),
            closes_at: closes_at.map(str::to_string),
            clear,
            beacon: None,
            names: FLAGS,
        }
        .change()
    }

    #[test]
    fn schedule_times_are_rfc3339_and_in_order() {
        let at = |t: &str| config::parse_time(t).unwrap();
        assert_eq!(
            change(Some("2026-12-03T14:00:00Z"), None, false).unwrap(),
            (Change::Set(at("2026-12-03T14:00:00Z")), Change::Keep)
        );
        assert_eq!(
            at("2026-12-03T15:00:00+01:00"),
            at("2026-12-03T14:00:00Z"),
            "offsets count"
        );
        assert_eq!(
            change(None, None, true).unwrap(),
            (Change::Clear, Change::Clear)
        );
        for (open, close) in [
            (None, None),
            (Some("tomorrow"), None),
            (Some("2026-12-03T14:00:00"), None),
            (Some("2026-12-03T14:00:00Z"), Some("2026-12-03T13:00:00Z")),
        ] {
            let err = crate::cli::CliError::from(change(open, close, false).unwrap_err());
            assert_eq!(err.exit_code(), 2, "{err}");
        }
        assert_eq!(
            config::format_time(at("2026-12-03T14:00:00Z")),
            "2026-12-03T14:00:00Z"
        );
    }
}

#[cfg(test)]
mod beacon_tests {
    use super::*;

    fn with_beacon(opens_at: Option<&str>, clear: bool, beacon: &str) -> ActionError {
        Schedule {
            queue: None,
            opens_at: opens_at.map(str::to_string),
            closes_at: None,
            clear,
            beacon: Some(beacon.to_string()),
            names: FLAGS,
        }
        .change()
        .unwrap_err()
    }

    #[test]
    fn a_beacon_needs_an_opening_and_a_known_source() {
        let err = with_beacon(None, false, "drand").to_string();
        assert!(err.contains("give --opens-at"), "{err}");
        let err = with_beacon(None, true, "drand").to_string();
        assert!(err.contains("give --opens-at"), "{err}");
        let err = with_beacon(Some("2026-12-03T14:00:00Z"), false, "nist").to_string();
        assert!(
            err.contains("not a beacon") && err.contains("drand"),
            "{err}"
        );
    }
}
