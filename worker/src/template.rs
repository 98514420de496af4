//! The waiting-room page's template and its translations, checked at build
//! time (`build.rs` includes this file) so a broken page or translation
//! never ships: the placeholders the worker fills, one inline script (the
//! CSP pins it by hash), the texts of its `T` object, and translations that
//! name only those texts and keep their placeholders. Std and `serde_json`
//! only.

/// The placeholders the worker fills; a template must have each.
pub const PLACEHOLDERS: [&str; 7] = [
    "{{lang}}",
    "{{title}}",
    "{{heading}}",
    "{{accent}}",
    "{{noscript}}",
    "{{config}}",
    "{{texts}}",
];

/// The English text of `<noscript>`.
pub const NOSCRIPT_EN: &str = "This waiting room needs JavaScript: it keeps your place and tells you when it is your turn. Please allow JavaScript for this site and reload the page, or open it in another browser.";

/// The texts of the page's `T` object, `(key, English text)` in order.
pub type Texts = Vec<(String, String)>;

/// Checks a page template; returns the texts of its `T` object.
pub fn check_template(text: &str) -> Result<Texts, String> {
    for p in PLACEHOLDERS {
        if !text.contains(p) {
            return Err(format!("the template lacks the placeholder {p}"));
        }
    }
    for (id, p) in [("qg-config", "{{config}}"), ("qg-texts", "{{texts}}")] {
        let element = format!(r#"<script type="application/json" id="{id}">{p}</script>"#);
        if !text.contains(&element) {
            return Err(format!(
                "{p} must sit alone in {element:?}, where the page reads it as JSON"
            ));
        }
    }
    if text.matches("<script>").count() != 1 || text.contains("<script src") {
        return Err(
            "the template must have exactly one inline <script> (the CSP allows it by its hash) and no <script src>"
                .into(),
        );
    }
    let texts = texts_of(text)?;
    if texts.is_empty() {
        return Err(
            "the template's script has no texts in `const T = Object.assign({ … })`".into(),
        );
    }
    Ok(texts)
}

/// The `key: "text",` lines of the `T` object.
fn texts_of(text: &str) -> Result<Texts, String> {
    let Some(start) = text.find("const T = Object.assign({") else {
        return Err("the template's script lacks `const T = Object.assign({`".into());
    };
    let mut out = Vec::new();
    for line in text[start..].lines().skip(1) {
        let line = line.trim();
        if line.starts_with('}') {
            break;
        }
        let Some((key, rest)) = line.split_once(": \"") else {
            continue;
        };
        let value = rest
            .strip_suffix("\",")
            .unwrap_or(rest.trim_end_matches('"'));
        if !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric()) {
            out.push((key.to_string(), value.to_string()));
        }
    }
    Ok(out)
}

/// The `{name}` placeholders of a text, sorted.
pub fn placeholders(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close)
                if close > 0 && after[..close].bytes().all(|b| b.is_ascii_alphanumeric()) =>
            {
                out.push(after[..close].to_string());
                rest = &after[close + 1..];
            }
            _ => rest = after,
        }
    }
    out.sort();
    out
}

/// Checks one language's texts against the English ones: valid JSON, an
/// object of strings, only known keys (and `noscript`), the same
/// placeholders, no `<` (they go into a script element and the page).
/// Returns the texts as JSON without `noscript`, and `noscript`
/// HTML-escaped (English when missing).
pub fn check_translation(
    lang: &str,
    json: &str,
    english: &Texts,
) -> Result<(String, String), String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("{lang}: not JSON: {e}"))?;
    let map = value
        .as_object()
        .ok_or_else(|| format!("{lang}: not a JSON object"))?;
    let mut texts = serde_json::Map::new();
    let mut noscript = NOSCRIPT_EN.to_string();
    for (key, v) in map {
        let text = v
            .as_str()
            .ok_or_else(|| format!("{lang}: {key} is not a string"))?;
        if text.contains('<') {
            return Err(format!("{lang}: {key} contains '<'"));
        }
        if key == "noscript" {
            noscript = text.to_string();
            continue;
        }
        let Some((_, en)) = english.iter().find(|(k, _)| k == key) else {
            return Err(format!("{lang}: {key} is not a text of the page"));
        };
        if placeholders(text) != placeholders(en) {
            return Err(format!(
                "{lang}: {key} has placeholders {:?}, the English text {:?}",
                placeholders(text),
                placeholders(en)
            ));
        }
        texts.insert(key.clone(), serde_json::Value::String(text.to_string()));
    }
    Ok((
        serde_json::Value::Object(texts).to_string(),
        escape_html(&noscript),
    ))
}

/// Text for HTML: `&`, `<`, `>` and `"` escaped.
pub fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page as shipped: without the comment lines of its inline script.
pub fn strip_script_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_script = false;
    for line in text.lines() {
        let code = line.trim_start();
        if code.starts_with("<script") && !code.contains("</script>") {
            in_script = true;
        } else if code.starts_with("</script>") {
            in_script = false;
        }
        if in_script && code.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = include_str!("../assets/waiting-room.html");

    #[test]
    fn the_page_passes_its_own_check() {
        let texts = check_template(PAGE).unwrap();
        assert!(texts.len() > 40, "{}", texts.len());
        assert!(texts.iter().any(|(k, v)| k == "about" && v == "about {n}"));
        assert!(texts.iter().any(|(k, _)| k == "progress"));
    }

    #[test]
    fn a_template_missing_what_the_worker_needs_is_refused() {
        let without = |what: &str, by: &str| PAGE.replacen(what, by, 1);
        let err = check_template(&without("{{noscript}}", "")).unwrap_err();
        assert!(err.contains("{{noscript}}"), "{err}");
        let err = check_template(&without(
            r#"<script type="application/json" id="qg-texts">{{texts}}</script>"#,
            "<div>{{texts}}</div>",
        ))
        .unwrap_err();
        assert!(err.contains("qg-texts"), "{err}");
        let err = check_template(&without("<script>", "<script>1</script><script>")).unwrap_err();
        assert!(err.contains("exactly one inline <script>"), "{err}");
        let err = check_template(&without(
            "</head>",
            r#"<script src="https://cdn.example/x.js"></script></head>"#,
        ))
        .unwrap_err();
        assert!(err.contains("<script src"), "{err}");
        let err =
            check_template(&without("const T = Object.assign({", "const T = ({")).unwrap_err();
        assert!(err.contains("const T"), "{err}");
    }

    #[test]
    fn translations_keep_placeholders_and_name_only_page_texts() {
        let en = check_template(PAGE).unwrap();
        let (json, noscript) = check_translation(
            "de",
            r#"{"about":"etwa {n}","noscript":"Bitte <b>JS</b>"}"#,
            &en,
        )
        .err()
        .map(|e| (e, String::new()))
        .unwrap_or_default();
        assert!(json.contains("contains '<'"), "{json} {noscript}");
        let (json, noscript) = check_translation(
            "de",
            r#"{"about":"etwa {n}","noscript":"Bitte JS & Co"}"#,
            &en,
        )
        .unwrap();
        assert_eq!(json, r#"{"about":"etwa {n}"}"#);
        assert_eq!(noscript, "Bitte JS &amp; Co");
        for (bad, why) in [
            (r#"{"about":"etwa"}"#, "placeholders"),
            (r#"{"about":"etwa {m}"}"#, "placeholders"),
            (r#"{"nope":"x"}"#, "not a text of the page"),
            (r#"{"about":1}"#, "not a string"),
            ("[]", "not a JSON object"),
            ("{", "not JSON"),
        ] {
            let err = check_translation("de", bad, &en).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        assert_eq!(placeholders("in {in}, {n} of {n} {}"), ["in", "n", "n"]);
    }

    #[test]
    fn every_shipped_translation_passes() {
        let en = check_template(PAGE).unwrap();
        for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/assets/i18n")).unwrap()
        {
            let path = entry.unwrap().path();
            let json = std::fs::read_to_string(&path).unwrap();
            let lang = path.file_stem().unwrap().to_string_lossy().to_string();
            let (texts, _) = check_translation(&lang, &json, &en).unwrap();
            let n = serde_json::from_str::<serde_json::Value>(&texts)
                .unwrap()
                .as_object()
                .unwrap()
                .len();
            assert_eq!(n, en.len(), "{lang}: every text translated");
        }
    }
}
