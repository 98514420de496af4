//! The waiting-room page (`GET /queue`): one static HTML file with inline
//! CSS and JS (worker/assets/waiting-room.html), filled with the operator's
//! settings. The page enters, polls at the server's retryAfter and shows
//! every state in plain words.

use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha2::{Digest, Sha256};

use crate::config::ConfigError;

const TEMPLATE: &str = include_str!("../assets/waiting-room.html");

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
    /// Reads `PAGE_TITLE`, `PAGE_HEADING`, `PAGE_ACCENT`, `CONTINUE_URL` and
    /// `PAGE_TEXTS`.
    pub fn from_lookup(get: &impl Fn(&str) -> Option<String>) -> Result<PageConfig, ConfigError> {
        let text = |name: &str, default: &str| {
            get(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        let accent = text("PAGE_ACCENT", "#3b5bdb");
        let hex = accent.strip_prefix('#').is_some_and(|h| {
            matches!(h.len(), 3 | 4 | 6 | 8) && h.bytes().all(|b| b.is_ascii_hexdigit())
        });
        let named = accent.bytes().all(|b| b.is_ascii_lowercase()) && accent.len() <= 20;
        if !(hex || named) {
            return Err(ConfigError {
                name: "PAGE_ACCENT",
                why: "must be a #hex colour or a CSS colour name".into(),
            });
        }
        let continue_url = text("CONTINUE_URL", "/");
        if !continue_url.starts_with('/') && !continue_url.starts_with("https://") {
            return Err(ConfigError {
                name: "CONTINUE_URL",
                why: "must be a path (/checkout) or an https:// URL".into(),
            });
        }
        let texts = match get("PAGE_TEXTS").filter(|t| !t.trim().is_empty()) {
            None => serde_json::Map::new(),
            Some(json) => match serde_json::from_str::<serde_json::Value>(&json) {
                Ok(serde_json::Value::Object(map)) if map.values().all(|v| v.is_string()) => map,
                _ => {
                    return Err(ConfigError {
                        name: "PAGE_TEXTS",
                        why: "must be a JSON object of strings, e.g. {\"heading\":\"…\"}".into(),
                    })
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

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page for `queue`.
pub fn render(config: &PageConfig, queue: &str) -> String {
    let data = serde_json::json!({
        "queue": queue,
        "heading": config.heading,
        "continueUrl": config.continue_url,
        "texts": config.texts,
    });
    // Inside <script type="application/json">: no "<" may close the tag.
    let data = data.to_string().replace('<', "\\u003c");
    let heading = if config.heading.is_empty() {
        "You are in the queue".to_string()
    } else {
        escape_html(&config.heading)
    };
    TEMPLATE
        .replace("{{title}}", &escape_html(&config.title))
        .replace("{{heading}}", &heading)
        .replace("{{accent}}", &config.accent)
        .replace("{{config}}", &data)
}

/// The Content-Security-Policy: only our own inline script (by hash),
/// requests to our own origin, no framing.
pub fn content_security_policy() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        let script = TEMPLATE
            .rsplit_once("<script>")
            .and_then(|(_, rest)| rest.split_once("</script>"))
            .map(|(body, _)| body)
            .unwrap_or_default();
        let hash = STANDARD.encode(Sha256::digest(script.as_bytes()));
        format!(
            "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
             connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; \
             frame-ancestors 'none'"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn page(pairs: &[(&str, &str)]) -> Result<PageConfig, ConfigError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PageConfig::from_lookup(&|k| map.get(k).cloned())
    }

    #[test]
    fn operator_texts_are_escaped_and_injected() {
        let c = page(&[
            ("PAGE_TITLE", "Drop <b>&</b>"),
            (
                "PAGE_TEXTS",
                r#"{"ordered":"Done </script><script>alert(1)</script>"}"#,
            ),
        ])
        .unwrap();
        let html = render(&c, "main");
        assert!(html.contains("<title>Drop &lt;b&gt;&amp;&lt;/b&gt;</title>"));
        assert!(
            !html.contains("</script><script>alert"),
            "no script injection"
        );
        assert!(html.contains(r#""queue":"main""#));
        assert!(!html.contains("{{"), "every placeholder filled");
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
    fn the_csp_pins_the_inline_script() {
        let csp = content_security_policy();
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
        assert!(csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("script-src 'unsafe-inline'"));
    }
}
