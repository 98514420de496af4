//! `schedule`: set or clear a queue's opening and closing (RFC 3339 times
//! with an offset), checked before Redis is asked.

use queuegate_shared::ops::{self, Change};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::{self, Config};
use crate::connect::RedisConn;
use crate::engine;

/// How the caller names the schedule's inputs: the CLI's flags, or the
/// API's JSON fields (errors name them as the caller wrote them).
pub type Names = [&'static str; 3];
/// The CLI's flags.
pub const FLAGS: Names = ["--opens-at", "--closes-at", "--clear"];
/// The API's fields.
pub const FIELDS: Names = ["opens_at", "closes_at", "clear"];

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
}

impl Schedule {
    /// The opening and closing asked for (or `clear` for neither), checked:
    /// times with an offset, something to change, a closing after the
    /// opening.
    pub fn change(&self) -> Result<(Change, Change), ActionError> {
        let [open_name, close_name, clear_name] = self.names;
        let (opens_at, closes_at) = (self.opens_at.as_deref(), self.closes_at.as_deref());
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
