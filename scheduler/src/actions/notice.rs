//! `notice`: set or clear the short notice to the line, shown on the
//! waiting-room page and in every state reply.

use queuegate_shared::ops::SetNotice;
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::Config;
use crate::connect::RedisConn;
use crate::engine;

/// Set (`text`) or clear (None) a queue's notice.
#[derive(Debug, Clone)]
pub struct Notice {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// The notice, or None to clear it.
    pub text: Option<String>,
    /// How the caller names the text (`--set`, `notice`), for errors.
    pub input: &'static str,
}

/// A queue's notice after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoticeNow {
    /// The queue.
    pub queue: String,
    /// The notice now (None: cleared).
    pub notice: Option<String>,
    /// The notice before (None: there was none).
    pub previous: Option<String>,
}

impl Notice {
    /// The notice, checked: one short line of text.
    pub fn text(&self) -> Result<Option<&str>, ActionError> {
        self.text
            .as_deref()
            .map(queuegate_shared::notice::check)
            .transpose()
            .map_err(|e| ActionError::BadInput(format!("{}: {e}", self.input)))
    }

    /// Sets or clears the notice; one that is not one short line of text
    /// is refused before Redis is asked.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<NoticeNow, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let text = self.text()?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let before = engine::run(
            conn,
            &SetNotice {
                keys: &keys,
                notice: text,
            },
        )
        .await?;
        Ok(NoticeNow {
            queue: q.id.to_string(),
            notice: text.map(str::to_string),
            previous: Some(before).filter(|b| !b.is_empty()),
        })
    }
}
