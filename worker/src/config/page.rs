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
    /// Overrides of the page's texts, by key (a JSON object of strings).
    pub texts: serde_json::Map<String, serde_json::Value>,
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
        let texts = match get("PAGE_TEXTS").filter(|t| !t.trim().is_empty()) {
            None => serde_json::Map::new(),
            Some(json) => match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(serde_json::Value::Object(map)) if map.values().all(|v| v.is_string()) => map,
                _ => {
                    return Err(err(
                        "PAGE_TEXTS",
                        "must be a JSON object of strings, e.g. {\"heading\":\"…\"}",
                    ))
                }
            },
        };
        Ok(PageConfig {
            title: text("PAGE_TITLE", "Waiting room"),
            heading: text("PAGE_HEADING", ""),
            accent,
            continue_url,
            texts,
        })
    }
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
}
