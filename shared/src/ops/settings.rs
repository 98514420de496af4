//! `settings`: an operator's change of a queue's run-time settings,
//! written only if nobody changed them since they were read (the caller
//! validated the result against what it read).

use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, SETTINGS};
use crate::value::{DecodeError, Fields, Value};

/// One change of the run-time settings.
#[derive(Debug, Clone)]
pub struct SetSettings<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The `settings_version` the caller read (None: never set).
    pub read_version: Option<u64>,
    /// Settings to set: name, JSON value.
    pub set: Vec<(String, String)>,
    /// Settings to remove (back to the file's value).
    pub remove: Vec<String>,
}

/// The script's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsReply {
    /// Written; the settings are at this version now.
    Changed(u64),
    /// Somebody changed them first: nothing written; they are at this
    /// version.
    Moved(u64),
}

impl Operation for SetSettings<'_> {
    type Reply = SettingsReply;

    fn invocation(&self) -> Invocation {
        let mut args = vec![
            self.read_version.map_or(String::new(), |v| v.to_string()),
            self.set.len().to_string(),
        ];
        for (name, value) in &self.set {
            args.push(name.clone());
            args.push(value.clone());
        }
        args.extend(self.remove.iter().cloned());
        Invocation {
            script: &SETTINGS,
            keys: vec![self.keys.settings(), self.keys.config(), self.keys.wake()],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<SettingsReply, DecodeError> {
        let f = Fields::new("settings", value)?;
        let version = f.uint(1)?;
        Ok(if f.int(0)? == 1 {
            SettingsReply::Changed(version)
        } else {
            SettingsReply::Moved(version)
        })
    }
}
