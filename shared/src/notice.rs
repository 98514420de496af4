//! The operator's notice to the line ("sizes S and M are sold out"): set
//! with `queuegate-scheduler notice`, kept in the queue's config hash,
//! shown on the waiting-room page and in every state reply.

use crate::json::{set_text, Json, TextObject};

/// The longest notice, in characters.
pub const MAX_CHARS: usize = 280;

/// Why a notice was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    /// Nothing but white space (clear a notice instead).
    #[error("the notice is empty (use --clear to remove one)")]
    Empty,
    /// Over [`MAX_CHARS`].
    #[error("the notice is longer than 280 characters")]
    TooLong,
    /// A control character (a line break, a tab, an escape): a notice is
    /// one line of plain text.
    #[error("the notice must be one line of plain text, without control characters")]
    Control,
}

/// `text` as a notice: trimmed, one line of at most [`MAX_CHARS`]
/// characters. The page shows it as text, never as markup.
pub fn check(text: &str) -> Result<&str, NoticeError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(NoticeError::Empty);
    }
    if text.chars().count() > MAX_CHARS {
        return Err(NoticeError::TooLong);
    }
    if text.chars().any(char::is_control) {
        return Err(NoticeError::Control);
    }
    Ok(text)
}

/// The languages a notice can be given in: the waiting-room page's own
/// (`worker/assets/i18n/`, English first; a worker test keeps the two
/// lists equal), so every text given can be shown to someone.
pub const LANGUAGES: &[&str] = &["en", "de", "es", "fr", "ja", "ko", "pt", "zh", "zh-Hant"];

/// The most texts a notice holds besides its default: one per language
/// of the page.
pub const MAX_LANGUAGES: usize = LANGUAGES.len();

/// Why a notice's texts per language were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextsError {
    /// A tag that is not one of [`LANGUAGES`].
    #[error("{0:?} is not a language of the page (use one of: {list})", list = LANGUAGES.join(", "))]
    UnknownLanguage(String),
    /// The same language twice.
    #[error("{0:?} is given twice")]
    Twice(String),
    /// More than [`MAX_LANGUAGES`] texts.
    #[error(
        "too many languages: {0} given, at most {MAX_LANGUAGES} (one per language of the page)"
    )]
    TooMany(usize),
    /// One of the texts is not a notice.
    #[error("the {lang:?} text: {why}")]
    Text {
        /// Its language.
        lang: String,
        /// Why it was refused.
        why: NoticeError,
    },
}

/// A notice's texts per language, checked: every tag one of
/// [`LANGUAGES`] (exactly as spelt there), none twice, at most
/// [`MAX_LANGUAGES`], each text a notice ([`check`], trimmed). Returns
/// them in the order given.
pub fn check_texts(texts: &[(String, String)]) -> Result<Vec<(String, String)>, TextsError> {
    if texts.len() > MAX_LANGUAGES {
        return Err(TextsError::TooMany(texts.len()));
    }
    let mut out: Vec<(String, String)> = Vec::with_capacity(texts.len());
    for (lang, text) in texts {
        if !LANGUAGES.contains(&lang.as_str()) {
            return Err(TextsError::UnknownLanguage(lang.clone()));
        }
        if out.iter().any(|(l, _)| l == lang) {
            return Err(TextsError::Twice(lang.clone()));
        }
        let text = check(text).map_err(|why| TextsError::Text {
            lang: lang.clone(),
            why,
        })?;
        out.push((lang.clone(), text.to_string()));
    }
    Ok(out)
}

/// Checked texts as stored in the config hash's `notice_texts` field: a
/// JSON object `{"de": "…"}` ('' for none).
pub fn encode_texts(texts: &[(String, String)]) -> String {
    if texts.is_empty() {
        return String::new();
    }
    // By language, each once (its last text): the same texts give the
    // same field, whatever order they were given in.
    let mut by_lang: Vec<(String, String)> = Vec::with_capacity(texts.len());
    for (lang, text) in texts {
        set_text(&mut by_lang, lang.clone(), text.clone());
    }
    by_lang.sort_by(|a, b| a.0.cmp(&b.0));
    serde_json::to_string(&TextObject(&by_lang)).unwrap_or_default()
}

/// The `notice_texts` field read back: what is not an object of known
/// languages' texts is left out (the default text is shown instead); a
/// language given twice keeps its last text.
pub fn decode_texts(field: &str) -> Vec<(String, String)> {
    let Some(Json::Object(members)) = Json::parse(field) else {
        return Vec::new();
    };
    let mut texts: Vec<(String, String)> = Vec::new();
    for (lang, text) in members {
        match text {
            Json::Text(text) if LANGUAGES.contains(&lang.as_str()) => {
                set_text(&mut texts, lang, text);
            }
            // The last value of a key is its value, text or not.
            _ => texts.retain(|(l, _)| *l != lang),
        }
    }
    texts
}

/// The text of a notice for a visitor whose page is in `lang`: that
/// language's own text if given, else the default.
pub fn for_language<'a>(default: &'a str, texts: &'a [(String, String)], lang: &str) -> &'a str {
    texts
        .iter()
        .find(|(l, _)| l == lang)
        .map_or(default, |(_, t)| t.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_one_short_line_of_text() {
        assert_eq!(
            check("  Sizes S and M are sold out. "),
            Ok("Sizes S and M are sold out.")
        );
        assert_eq!(check("사이즈 S, M 품절 <b>"), Ok("사이즈 S, M 품절 <b>"));
        assert_eq!(
            check(&"é".repeat(MAX_CHARS)).map(str::len),
            Ok(2 * MAX_CHARS)
        );
        assert_eq!(check(&"é".repeat(MAX_CHARS + 1)), Err(NoticeError::TooLong));
        assert_eq!(check(" \t "), Err(NoticeError::Empty));
        for bad in ["one\ntwo", "a\u{1b}[31mred", "tab\there", "nul\0"] {
            assert_eq!(check(bad), Err(NoticeError::Control), "{bad:?}");
        }
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(l, t)| (l.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn texts_per_language_are_checked_and_stored_as_json() {
        let ok = check_texts(&pairs(&[("de", " Ausverkauft "), ("zh-Hant", "已售完")])).unwrap();
        assert_eq!(ok, pairs(&[("de", "Ausverkauft"), ("zh-Hant", "已售完")]));
        let field = encode_texts(&ok);
        assert_eq!(decode_texts(&field), ok);
        assert_eq!(encode_texts(&[]), "");
        assert_eq!(decode_texts(""), Vec::new());
        assert_eq!(decode_texts("[1]"), Vec::new());
        assert_eq!(
            decode_texts(r#"{"xx":"?","de":1,"fr":"Épuisé"}"#),
            pairs(&[("fr", "Épuisé")])
        );
        assert_eq!(
            encode_texts(&pairs(&[("fr", "a"), ("de", "b"), ("fr", "c")])),
            r#"{"de":"b","fr":"c"}"#,
            "by language, each once, the last text kept"
        );
        assert_eq!(
            decode_texts(r#"{"de":"a","de":"b"}"#),
            pairs(&[("de", "b")]),
            "as JSON.parse reads it"
        );
        assert_eq!(decode_texts(r#"{"de":"a","de":1}"#), Vec::new());
        assert_eq!(for_language("Sold out", &ok, "de"), "Ausverkauft");
        assert_eq!(for_language("Sold out", &ok, "fr"), "Sold out");

        for (bad, why) in [
            (
                pairs(&[("xx", "?")]),
                "\"xx\" is not a language of the page",
            ),
            (
                pairs(&[("DE", "?")]),
                "\"DE\" is not a language of the page",
            ),
            (
                pairs(&[("zh-TW", "?")]),
                "use one of: en, de, es, fr, ja, ko, pt, zh, zh-Hant",
            ),
            (pairs(&[("de", "a"), ("de", "b")]), "\"de\" is given twice"),
            (
                pairs(&[("de", "a\nb")]),
                "the \"de\" text: the notice must be one line",
            ),
            (
                pairs(&[("de", " ")]),
                "the \"de\" text: the notice is empty",
            ),
        ] {
            let e = check_texts(&bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let long = pairs(&[("fr", &"é".repeat(MAX_CHARS + 1))]);
        assert!(check_texts(&long)
            .unwrap_err()
            .to_string()
            .contains("longer than 280"));
        let many: Vec<(String, String)> = (0..=MAX_LANGUAGES)
            .map(|i| (LANGUAGES[i % LANGUAGES.len()].to_string(), "x".to_string()))
            .collect();
        assert_eq!(
            check_texts(&many),
            Err(TextsError::TooMany(MAX_LANGUAGES + 1))
        );
    }
}
