//! `schedule`: a queue's scheduled opening and closing, in the config hash
//! where the edge scripts read them.

use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, SCHEDULE};
use crate::value::{DecodeError, Fields, Value};

/// What to do with one schedule time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Leave it as it is.
    Keep,
    /// Set it (epoch ms).
    Set(u64),
    /// Remove it.
    Clear,
}

impl Change {
    fn arg(self) -> String {
        match self {
            Change::Keep => String::new(),
            Change::Set(ms) => ms.to_string(),
            Change::Clear => "-".into(),
        }
    }
}

/// Set or clear the opening and the closing.
#[derive(Debug, Clone, Copy)]
pub struct Schedule<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The opening: before it new places go to the pre-queue.
    pub opens_at: Change,
    /// The closing: from it no new places are taken.
    pub closes_at: Change,
}

/// The schedule in force after the call (epoch ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scheduled {
    /// The opening, if any.
    pub opens_at: Option<u64>,
    /// The closing, if any.
    pub closes_at: Option<u64>,
}

impl Operation for Schedule<'_> {
    type Reply = Scheduled;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &SCHEDULE,
            keys: vec![self.keys.config()],
            args: vec![self.opens_at.arg(), self.closes_at.arg()],
        }
    }

    fn decode(&self, value: Value) -> Result<Scheduled, DecodeError> {
        let f = Fields::new("schedule", value)?;
        let time = |i| -> Result<Option<u64>, DecodeError> {
            match f.text(i)? {
                "" => Ok(None),
                t => t
                    .parse()
                    .map(Some)
                    .map_err(|_| f.error(format!("field {i} is no time: {t:?}"))),
            }
        };
        Ok(Scheduled {
            opens_at: time(0)?,
            closes_at: time(1)?,
        })
    }
}
