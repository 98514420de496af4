//! `notice`: set or clear the short notice to the line, shown on the
//! waiting-room page and in every state reply: one default text, and
//! optionally a text per language of the page, each shown to visitors
//! whose page is in that language.

use std::collections::BTreeMap;

use queuegate_shared::ops::SetNotice;
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::Config;
use crate::connect::RedisConn;
use crate::engine;

/// Set (`text`, with `texts` per language) or clear (None) a queue's
/// notice.
#[derive(Debug, Clone)]
pub struct Notice {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// The notice's default text, or None to clear it.
    pub text: Option<String>,
    /// Its texts per language (`[("de", "…")]`), in the order given.
    pub texts: Vec<(String, String)>,
    /// How the caller names the text (`--set`, `notice`), for errors.
    pub input: &'static str,
    /// How the caller names the texts per language (`--lang`, `texts`).
    pub texts_input: &'static str,
}

/// A queue's notice after a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NoticeNow {
    /// The queue.
    pub queue: String,
    /// The notice now, its default text (None: cleared).
    pub notice: Option<String>,
    /// Its texts per language now.
    pub texts: BTreeMap<String, String>,
    /// The notice before (None: there was none).
    pub previous: Option<String>,
    /// Its texts per language before.
    pub previous_texts: BTreeMap<String, String>,
}

/// A notice's checked input: the default text (None: clear) and the
/// texts per language.
type Checked<'a> = (Option<&'a str>, Vec<(String, String)>);

impl Notice {
    /// The notice, checked: the default text one short line of text, and
    /// each text per language too, in a language of the page, none twice.
    /// Texts per language without a default text (a clear) are refused.
    pub fn text(&self) -> Result<Checked<'_>, ActionError> {
        let text = self
            .text
            .as_deref()
            .map(queuegate_shared::notice::check)
            .transpose()
            .map_err(|e| ActionError::BadInput(format!("{}: {e}", self.input)))?;
        if text.is_none() && !self.texts.is_empty() {
            return Err(ActionError::BadInput(format!(
                "{}: texts per language need a default text (clearing a notice clears them all)",
                self.texts_input
            )));
        }
        let texts = queuegate_shared::notice::check_texts(&self.texts)
            .map_err(|e| ActionError::BadInput(format!("{}: {e}", self.texts_input)))?;
        Ok((text, texts))
    }

    /// Sets or clears the notice; one that is not one short line of text
    /// (or whose texts per language are not) is refused before Redis is
    /// asked, and nothing changes.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<NoticeNow, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let (text, texts) = self.text()?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let before = engine::run(
            conn,
            &SetNotice {
                keys: &keys,
                notice: text,
                texts: &texts,
            },
        )
        .await?;
        Ok(NoticeNow {
            queue: q.id.to_string(),
            notice: text.map(str::to_string),
            texts: if text.is_some() {
                texts.into_iter().collect()
            } else {
                BTreeMap::new()
            },
            previous: Some(before.text).filter(|b| !b.is_empty()),
            previous_texts: before.texts.into_iter().collect(),
        })
    }
}
