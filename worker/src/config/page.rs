//! The waiting-room page's operator settings (README "The waiting-room
//! page"), read with the rest of the configuration.

use queuegate_shared::json::{set_text, Json, TextObject};
use serde::ser::{Serialize, Serializer};

use super::{err, ConfigError};

/// What the operator can change about the page (README "The waiting-room
/// page").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageConfig {
    /// `PAGE_TITLE`, the `<title>` in every language (None: each
    /// language's own, "Waiting room" in English).
    pub title: Option<String>,
    /// The heading; empty keeps the default text.
    pub heading: String,
    /// CSS colour of buttons and the progress bar.
    pub accent: String,
    /// Where the "Continue" button leads once admitted.
    pub continue_url: String,
    /// Overrides of the page's texts in every language, by key.
    pub texts: Texts,
    /// Overrides for one language (`"de": {…}` in `PAGE_TEXTS`), which win
    /// over those of every language.
    pub texts_by_lang: Vec<(String, Texts)>,
    /// Signed in (`IDENTITY_MODE=jwt`): the page sends the shop's login
    /// token, and asks for a fresh one when a poll is refused 401.
    pub signed_in: bool,
    /// `PAGE_TOKEN_SCRIPT`: the shop's script (a path on this site) that
    /// defines `window.queuegateToken()`, which the page asks for the
    /// login token before each call (signed in only).
    pub token_script: Option<String>,
    /// `PAGE_TOKEN_CONNECT`: the origins that script may fetch from
    /// besides this site (the login service's token endpoint).
    pub token_connect: Vec<String>,
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

    /// Reads `PAGE_TITLE`, `PAGE_HEADING`, `PAGE_ACCENT`, `CONTINUE_URL`,
    /// `PAGE_TEXTS`, `PAGE_TOKEN_SCRIPT` and `PAGE_TOKEN_CONNECT` (and
    /// `IDENTITY_MODE`, which the token settings need to be `jwt`).
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
            None => (Texts::default(), Vec::new()),
            Some(json) => page_texts(&json)?,
        };
        let signed_in = text("IDENTITY_MODE", "anonymous") == "jwt";
        let some = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let token_script = some("PAGE_TOKEN_SCRIPT")
            .map(|p| token_script(p.trim(), signed_in))
            .transpose()?;
        let token_connect = match some("PAGE_TOKEN_CONNECT") {
            None => Vec::new(),
            Some(_) if token_script.is_none() => {
                return Err(err(
                    "PAGE_TOKEN_CONNECT",
                    "is for the script of PAGE_TOKEN_SCRIPT, which is not set",
                ))
            }
            Some(list) => token_connect(&list)?,
        };
        Ok(PageConfig {
            title: some("PAGE_TITLE"),
            heading: text("PAGE_HEADING", ""),
            accent,
            continue_url,
            texts,
            texts_by_lang,
            signed_in,
            token_script,
            token_connect,
        })
    }
}

/// The longest `PAGE_TOKEN_SCRIPT` path.
const MAX_SCRIPT_PATH: usize = 200;

/// The most origins `PAGE_TOKEN_CONNECT` names.
const MAX_CONNECT: usize = 4;

/// `PAGE_TOKEN_SCRIPT`: a path on this site (`/auth/queuegate-token.js`),
/// of the characters a CSP source can carry as they are, outside the
/// worker's own `/queue` paths; signed in only.
fn token_script(path: &str, signed_in: bool) -> Result<String, ConfigError> {
    let bad = |why: &str| err("PAGE_TOKEN_SCRIPT", why);
    if !signed_in {
        return Err(bad(
            "is for signed-in mode (IDENTITY_MODE=jwt): anonymous visitors have no login token",
        ));
    }
    if !path.starts_with('/') || path.starts_with("//") {
        return Err(bad(
            "must be a path on this site, like /auth/queuegate-token.js (not a URL: the page's CSP allows a script from this site only)",
        ));
    }
    if path.len() > MAX_SCRIPT_PATH
        || !path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._~-".contains(&b))
    {
        return Err(bad(
            "may hold only letters, digits and / . _ ~ - (no query, no spaces), at most 200 characters",
        ));
    }
    if path.split('/').any(|s| s == "." || s == "..") || path.ends_with('/') {
        return Err(bad("must name a file, without . or .. segments"));
    }
    if path == "/queue" || path.starts_with("/queue/") {
        return Err(bad(
            "must not be under /queue (the worker's own routes): serve it from the shop",
        ));
    }
    Ok(path.to_string())
}

/// `PAGE_TOKEN_CONNECT`: https origins (`https://clerk.shop.example`),
/// separated by spaces or commas, at most [`MAX_CONNECT`]; loopback http
/// for tests.
fn token_connect(list: &str) -> Result<Vec<String>, ConfigError> {
    let mut out: Vec<String> = Vec::new();
    for origin in list.split([',', ' ']).filter(|o| !o.is_empty()) {
        let (scheme, host) = origin.split_once("://").unwrap_or(("", ""));
        let loopback = scheme == "http"
            && ["127.0.0.1:", "localhost:", "[::1]:"]
                .iter()
                .any(|p| host.starts_with(p));
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
        if !(scheme == "https" || loopback) || !host_ok {
            return Err(err(
                "PAGE_TOKEN_CONNECT",
                format!("{origin:?} is not an origin like https://login.example.com (https, a host, no path, no wildcard)"),
            ));
        }
        if !out.iter().any(|o| o == origin) {
            out.push(origin.to_string());
        }
    }
    if out.len() > MAX_CONNECT {
        return Err(err(
            "PAGE_TOKEN_CONNECT",
            format!("names {} origins, at most {MAX_CONNECT}", out.len()),
        ));
    }
    Ok(out)
}

impl PageConfig {
    /// The operator's overrides for `lang`: those of every language, then
    /// those of `lang` over them.
    pub fn texts_for(&self, lang: &str) -> Texts {
        let mut texts = self.texts.clone();
        if let Some((_, own)) = self.texts_by_lang.iter().find(|(l, _)| l == lang) {
            for (key, text) in &own.0 {
                texts.set(key.clone(), text.clone());
            }
        }
        texts
    }
}

/// Texts of the page by key, in the order `PAGE_TEXTS` gave them, each key
/// once; written out as a JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Texts(Vec<(String, String)>);

impl Texts {
    /// The text of `key`, if the operator gave one.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, t)| t.as_str())
    }

    /// Gives `key` the text `text`, over any it had.
    fn set(&mut self, key: String, text: String) {
        set_text(&mut self.0, key, text);
    }
}

impl Serialize for Texts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        TextObject(&self.0).serialize(serializer)
    }
}

/// `PAGE_TEXTS`: a JSON object whose members are texts of the page
/// (`"waiting": "…"`, for every language) or languages of the page
/// (`"de": {"waiting": "…"}`, for that one); any other key, or a value that
/// is not text, is refused with the reason. A key given twice keeps its
/// last value, as in JavaScript.
fn page_texts(json: &str) -> Result<(Texts, Vec<(String, Texts)>), ConfigError> {
    let bad = |why: String| err("PAGE_TEXTS", why);
    let Json::Object(members) = Json::parse(json).ok_or_else(|| {
        bad(
            "must be a JSON object of texts, e.g. {\"waiting\":\"…\",\"de\":{\"waiting\":\"…\"}}"
                .into(),
        )
    })?
    else {
        return Err(bad(
            "must be a JSON object of texts, e.g. {\"waiting\":\"…\"}".into(),
        ));
    };
    let text_of = |key: String, value: Json| -> Result<(String, String), ConfigError> {
        if !crate::i18n::TEXT_KEYS.contains(&key.as_str()) {
            return Err(bad(format!("{key:?} is not a text of the page (see the T object in worker/assets/waiting-room.html)")));
        }
        match value {
            Json::Text(text) => Ok((key, text)),
            _ => Err(bad(format!("{key:?} must be a string"))),
        }
    };
    let (mut all, mut by_lang) = (Texts::default(), Vec::<(String, Texts)>::new());
    for (key, value) in members {
        if let Json::Object(own) = value {
            if !crate::i18n::CODES.contains(&key.as_str()) {
                return Err(bad(format!(
                    "{key:?} is not a language of the page ({})",
                    crate::i18n::CODES.join(", ")
                )));
            }
            let mut texts = Texts::default();
            for (k, v) in own {
                let (k, text) = text_of(k, v)?;
                texts.set(k, text);
            }
            by_lang.retain(|(l, _)| *l != key);
            by_lang.push((key, texts));
        } else {
            let (k, text) = text_of(key, value)?;
            all.set(k, text);
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
    fn the_token_script_is_a_path_of_this_site_in_signed_in_mode_only() {
        let jwt = |pairs: &[(&'static str, &'static str)]| {
            let mut all = vec![("IDENTITY_MODE", "jwt")];
            all.extend_from_slice(pairs);
            page(&all)
        };
        let c = jwt(&[
            ("PAGE_TOKEN_SCRIPT", "/auth/queuegate-token.js"),
            (
                "PAGE_TOKEN_CONNECT",
                "https://clerk.shop.example, https://securetoken.googleapis.com",
            ),
        ])
        .unwrap();
        assert!(c.signed_in);
        assert_eq!(c.token_script.as_deref(), Some("/auth/queuegate-token.js"));
        assert_eq!(
            c.token_connect,
            [
                "https://clerk.shop.example",
                "https://securetoken.googleapis.com"
            ]
        );
        assert_eq!(jwt(&[]).unwrap().token_script, None);
        assert!(!page(&[]).unwrap().signed_in);
        for (pairs, why) in [
            (
                vec![
                    ("IDENTITY_MODE", "anonymous"),
                    ("PAGE_TOKEN_SCRIPT", "/t.js"),
                ],
                "is for signed-in mode",
            ),
            (
                vec![("PAGE_TOKEN_SCRIPT", "https://cdn.example/t.js")],
                "must be a path on this site",
            ),
            (
                vec![("PAGE_TOKEN_SCRIPT", "//cdn.example/t.js")],
                "must be a path on this site",
            ),
            (
                vec![("PAGE_TOKEN_SCRIPT", "/t.js; script-src *")],
                "may hold only",
            ),
            (vec![("PAGE_TOKEN_SCRIPT", "/t.js?v=1")], "may hold only"),
            (
                vec![("PAGE_TOKEN_SCRIPT", "/a/../queue/x.js")],
                "without . or ..",
            ),
            (vec![("PAGE_TOKEN_SCRIPT", "/auth/")], "must name a file"),
            (
                vec![("PAGE_TOKEN_SCRIPT", "/queue/t.js")],
                "must not be under /queue",
            ),
            (
                vec![("PAGE_TOKEN_CONNECT", "https://a.example")],
                "PAGE_TOKEN_SCRIPT, which is not set",
            ),
            (
                vec![
                    ("PAGE_TOKEN_SCRIPT", "/t.js"),
                    ("PAGE_TOKEN_CONNECT", "http://evil.example"),
                ],
                "is not an origin",
            ),
            (
                vec![
                    ("PAGE_TOKEN_SCRIPT", "/t.js"),
                    ("PAGE_TOKEN_CONNECT", "https://*.example"),
                ],
                "is not an origin",
            ),
            (
                vec![
                    ("PAGE_TOKEN_SCRIPT", "/t.js"),
                    ("PAGE_TOKEN_CONNECT", "https://a.example/path"),
                ],
                "is not an origin",
            ),
            (
                vec![
                    ("PAGE_TOKEN_SCRIPT", "/t.js"),
                    (
                        "PAGE_TOKEN_CONNECT",
                        "https://a.b https://b.b https://c.b https://d.b https://e.b",
                    ),
                ],
                "at most 4",
            ),
        ] {
            let mut all = vec![("IDENTITY_MODE", "jwt")];
            all.extend(pairs.iter().filter(|(k, _)| *k != "IDENTITY_MODE"));
            if let Some(mode) = pairs.iter().find(|(k, _)| *k == "IDENTITY_MODE") {
                all[0] = *mode;
            }
            let e = page(&all).unwrap_err();
            assert!(e.to_string().contains(why), "{pairs:?}: {e}");
        }
    }

    #[test]
    fn page_texts_override_every_language_or_one() {
        let c = page(&[(
            "PAGE_TEXTS",
            r#"{"waiting":"Hold on","continue":"Go","de":{"waiting":"Bitte warten"}}"#,
        )])
        .unwrap();
        let de = c.texts_for("de");
        assert_eq!(
            de.get("waiting"),
            Some("Bitte warten"),
            "the language's own wins"
        );
        assert_eq!(de.get("continue"), Some("Go"));
        assert_eq!(c.texts_for("ko").get("waiting"), Some("Hold on"));
        assert_eq!(
            serde_json::to_string(&de).unwrap(),
            r#"{"waiting":"Bitte warten","continue":"Go"}"#,
            "written as an object, each key once"
        );
        let twice = page(&[(
            "PAGE_TEXTS",
            r#"{"waiting":"A","waiting":"B","de":{"waiting":"C"},"de":{"continue":"D"}}"#,
        )])
        .unwrap();
        assert_eq!(
            twice.texts_for("ko").get("waiting"),
            Some("B"),
            "the last wins"
        );
        let de = twice.texts_for("de");
        assert_eq!(
            (de.get("waiting"), de.get("continue")),
            (Some("B"), Some("D")),
            "a language given twice: its last object, as JSON.parse reads it"
        );
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
