//! The waiting-room page's operator settings (README "The waiting-room
//! page"), read with the rest of the configuration.

use super::{err, ConfigError};

/// What the operator can change about the page (README "The waiting-room
/// page").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageConfig {
    /// `<title>`.
    pub title: String,
    /// The heading; empty keeps the default text.
    pub heading: String,
    /// CSS colour of buttons and the progress bar.
    pub accent: String,
    /// Where the "Continue" button leads once admitted.
    pub continue_url: String,
    /// Overrides of the page's texts in every language, by key.
    pub texts: serde_json::Map<String, serde_json::Value>,
    /// Overrides for one language (`"de": {…}` in `PAGE_TEXTS`), which win
    /// over those of every language.
    pub texts_by_lang: Vec<(String, serde_json::Map<String, serde_json::Value>)>,
}

impl PageConfig {
    /// The page settings from name/value pairs (tests).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Result<PageConfig, ConfigError> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PageConfig::from_lookup(&|k| map.get(k).cloned())
    }

    /// Reads `PAGE_TITLE`, `PAGE_HEADING`, `PAGE_ACCENT`, `CONTINUE_URL` and
    /// `PAGE_TEXTS`.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<PageConfig, ConfigError> {
        let text = |name: &str, default: &str| super::var_or(get, name, default);
        let accent = text("PAGE_ACCENT", "#3b5bdb");
        let hex = accent.strip_prefix('#').is_some_and(|h| {
            matches!(h.len(), 3 | 4 | 6 | 8) && h.bytes().all(|b| b.is_ascii_hexdigit())
        });
        let named = accent.bytes().all(|b| b.is_ascii_lowercase()) && accent.len() <= 20;
        if !(hex || named) {
            return Err(err(
                "PAGE_ACCENT",
                "must be a #hex colour or a CSS colour name",
            ));
        }
        let continue_url = text("CONTINUE_URL", "/");
        if !continue_url.starts_with('/') && !continue_url.starts_with("https://") {
            return Err(err(
                "CONTINUE_URL",
                "must be a path (/checkout) or an https:// URL",
            ));
        }
        let (texts, texts_by_lang) = match get("PAGE_TEXTS").filter(|t| !t.trim().is_empty()) {
            None => (serde_json::Map::new(), Vec::new()),
            Some(json) => page_texts(&json)?,
        };
        Ok(PageConfig {
            title: text("PAGE_TITLE", "Waiting room"),
            heading: text("PAGE_HEADING", ""),
            accent,
            continue_url,
            texts,
            texts_by_lang,
        })
    }
}

impl PageConfig {
    /// The operator's overrides for `lang`: those of every language, then
    /// those of `lang` over them.
    pub fn texts_for(&self, lang: &str) -> serde_json::Map<String, serde_json::Value> {
        let mut texts = self.texts.clone();
        if let Some((_, own)) = self.texts_by_lang.iter().find(|(l, _)| l == lang) {
            texts.extend(own.clone());
        }
        texts
    }
}

type Texts = serde_json::Map<String, serde_json::Value>;

/// `PAGE_TEXTS`: a JSON object whose members are texts of the page
/// (`"waiting": "…"`, for every language) or languages of the page
/// (`"de": {"waiting": "…"}`, for that one); any other key, or a value that
/// is not text, is refused with the reason.
fn page_texts(json: &str) -> Result<(Texts, Vec<(String, Texts)>), ConfigError> {
    let bad = |why: String| err("PAGE_TEXTS", why);
    let serde_json::Value::Object(map) = serde_json::from_str::<serde_json::Value>(json)
        .map_err(|_| bad("must be a JSON object of texts, e.g. {\"waiting\":\"…\",\"de\":{\"waiting\":\"…\"}}".into()))?
    else {
        return Err(bad("must be a JSON object of texts, e.g. {\"waiting\":\"…\"}".into()));
    };
    let text_of = |key: &str, value: &serde_json::Value| -> Result<(), ConfigError> {
        if !crate::i18n::TEXT_KEYS.contains(&key) {
            return Err(bad(format!("{key:?} is not a text of the page (see the T object in worker/assets/waiting-room.html)")));
        }
        if !value.is_string() {
            return Err(bad(format!("{key:?} must be a string")));
        }
        Ok(())
    };
    let (mut all, mut by_lang) = (Texts::new(), Vec::new());
    for (key, value) in map {
        if let serde_json::Value::Object(own) = &value {
            if !crate::i18n::CODES.contains(&key.as_str()) {
                return Err(bad(format!(
                    "{key:?} is not a language of the page ({})",
                    crate::i18n::CODES.join(", ")
                )));
            }
            for (k, v) in own {
                text_of(k, v)?;
            }
            by_lang.push((key, own.clone()));
        } else {
            text_of(&key, &value)?;
            all.insert(key, value);
        }
    }
    Ok((all, by_lang))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(pairs: &[(&str, &str)]) -> Result<PageConfig, ConfigError> {
        PageConfig::from_pairs(pairs)
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(page(&[("PAGE_ACCENT", "red; } body { display:none")]).is_err());
        assert!(page(&[("PAGE_ACCENT", "#12345g")]).is_err());
        assert!(page(&[("PAGE_ACCENT", "teal")]).is_ok());
        assert!(page(&[("CONTINUE_URL", "javascript:alert(1)")]).is_err());
        assert!(page(&[("PAGE_TEXTS", "[1]")]).is_err());
        assert!(page(&[("PAGE_TEXTS", r#"{"a":1}"#)]).is_err());
    }

    #[test]
    fn page_texts_override_every_language_or_one() {
        let c = page(&[(
            "PAGE_TEXTS",
            r#"{"waiting":"Hold on","continue":"Go","de":{"waiting":"Bitte warten"}}"#,
        )])
        .unwrap();
        let de = c.texts_for("de");
        assert_eq!(de["waiting"], "Bitte warten", "the language's own wins");
        assert_eq!(de["continue"], "Go");
        assert_eq!(c.texts_for("ko")["waiting"], "Hold on");
        for (json, why) in [
            (
                r#"{"wating":"typo"}"#,
                "\"wating\" is not a text of the page",
            ),
            (
                r#"{"xx":{"waiting":"?"}}"#,
                "\"xx\" is not a language of the page",
            ),
            (r#"{"de":{"waiting":1}}"#, "\"waiting\" must be a string"),
            (
                r#"{"de":{"nope":"x"}}"#,
                "\"nope\" is not a text of the page",
            ),
        ] {
            let e = page(&[("PAGE_TEXTS", json)]).unwrap_err();
            assert_eq!(e.name, "PAGE_TEXTS");
            assert!(e.to_string().contains(why), "{json}: {e}");
        }
    }
}
