//! `schedule`: a queue's scheduled opening and closing, in the config hash
//! where the edge scripts read them.

use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, PUBLISH_FILE, SCHEDULE};
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
    /// The schedule's version (one more for every write).
    pub version: u64,
}

impl Operation for Schedule<'_> {
    type Reply = Scheduled;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &SCHEDULE,
            keys: vec![self.keys.config(), self.keys.wake()],
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
            version: if f.len() > 2 { f.uint(2)? } else { 0 },
        })
    }
}

/// When a lease holder publishes its config file ([`PublishFile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileMoment {
    /// It took the lease: only where no file is published yet.
    TakeOver,
    /// Its file was reloaded: it replaces the published one.
    Reload,
}

/// The lease holder publishes its config file: the fingerprint of its
/// settings and schedule, the settings, and the schedule's times, which
/// never go over a newer schedule nor put a past opening over a future one.
#[derive(Debug, Clone)]
pub struct PublishFile<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The lease owner: nobody else publishes.
    pub owner: &'a str,
    /// The file's fingerprint.
    pub fingerprint: &'a str,
    /// The file's settings as JSON.
    pub settings_json: String,
    /// When.
    pub moment: FileMoment,
    /// The file's opening to publish (None: none, or unchanged on a reload).
    pub opens_at: Option<u64>,
    /// Its closing, likewise.
    pub closes_at: Option<u64>,
}

/// What [`PublishFile`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilePublished {
    /// Not the lease holder: nothing written.
    NotHolder,
    /// This file is the published one.
    Ours(FileState),
    /// Another file is published and was kept.
    Kept(FileState),
}

/// The published file after a [`PublishFile`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileState {
    /// Its fingerprint.
    pub fingerprint: String,
    /// Its settings (JSON).
    pub settings_json: String,
    /// The file's opening had passed and a future one was published: kept.
    pub kept_opening: bool,
    /// The schedule's version.
    pub schedule_version: u64,
}

impl Operation for PublishFile<'_> {
    type Reply = FilePublished;

    fn invocation(&self) -> Invocation {
        let time = |t: Option<u64>| t.map_or(String::new(), |t| t.to_string());
        Invocation {
            script: &PUBLISH_FILE,
            keys: vec![self.keys.config(), self.keys.lock()],
            args: vec![
                self.owner.to_string(),
                self.fingerprint.to_string(),
                self.settings_json.clone(),
                match self.moment {
                    FileMoment::TakeOver => "first",
                    FileMoment::Reload => "reload",
                }
                .to_string(),
                time(self.opens_at),
                time(self.closes_at),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<FilePublished, DecodeError> {
        let f = Fields::new("publish_file", value)?;
        let state = FileState {
            fingerprint: f.text(1)?.to_string(),
            settings_json: f.text(2)?.to_string(),
            kept_opening: f.text(3)? == "1",
            schedule_version: f.uint(4)?,
        };
        match f.int(0)? {
            0 => Ok(FilePublished::NotHolder),
            1 => Ok(FilePublished::Ours(state)),
            2 => Ok(FilePublished::Kept(state)),
            code => Err(f.error(format!("unknown code {code}"))),
        }
    }
}
