//! The waiting-room page (`GET /queue`): one static HTML file with inline
//! CSS and JS (worker/assets/waiting-room.html), filled with the operator's
//! settings. The page enters, polls at the server's retryAfter and shows
//! every state in plain words. The template and each language's texts are
//! static assets ([`crate::assets`]), read once per isolate.

use std::rc::Rc;
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use sha2::{Digest, Sha256};

use queuegate_edge::lang::Choice;

use crate::assets;
use crate::config::{PageConfig, Texts, TurnstileConfig};
use crate::error::EdgeError;
use crate::template::escape_html;

/// The template's asset: `assets/waiting-room.html` (or the shop's own
/// template) without its script's comment lines, checked at build
/// (build.rs, `crate::template`).
const TEMPLATE_ASSET: &str = "page/waiting-room.html";

/// The page's files for one language: the template, and the language's
/// `<noscript>` HTML (first line) and texts as JSON (the rest).
#[derive(Debug, Clone)]
pub struct Files {
    /// The template.
    pub template: Rc<str>,
    /// `page/<lang>.txt`.
    pub language: Rc<str>,
}

/// The page's files for `lang` (one of [`crate::i18n::CODES`]), from the assets.
pub async fn files(lang: &str) -> Result<Files, EdgeError> {
    Ok(Files {
        template: assets::text(TEMPLATE_ASSET).await?,
        language: assets::text(&format!("page/{lang}.txt")).await?,
    })
}

/// The page for `queue` in the visitor's language (`choice`, from
/// `Accept-Language`, whose `files` these are); Continue leads to `back`
/// (a return target, already checked) or else to `CONTINUE_URL`. With
/// Turnstile on, the page learns its site key and script, and renders the
/// widget when the edge asks for the check.
pub fn render(
    files: &Files,
    config: &PageConfig,
    queue: &str,
    back: Option<&str>,
    turnstile: Option<&TurnstileConfig>,
    choice: &Choice,
    form: Option<&queuegate_edge::visit::KeptForm>,
) -> String {
    let (noscript, builtin) = files.language.split_once('\n').unwrap_or(("", "{}"));
    let texts = config.texts_for(choice.lang);
    let title = title(config, &texts, builtin);
    let data = PageData {
        continue_url: back.unwrap_or(&config.continue_url),
        // A person's form sent before their turn: the page sends it again
        // on Continue (its fields are text in JSON, never markup).
        form,
        heading: &config.heading,
        locale: &choice.locale,
        queue,
        signed_in: config.signed_in,
        texts: &texts,
        token_script: config.token_script.as_deref(),
        turnstile: turnstile.map(|t| TurnstileData {
            script: &t.script_url,
            site_key: &t.site_key,
        }),
    };
    // Inside <script type="application/json">: no "<" may close the tag.
    let data = serde_json::to_string(&data)
        .unwrap_or_default()
        .replace('<', "\\u003c");
    // Until the script knows the visitor's state (or without JavaScript at
    // all) the heading is the neutral title: "You are in the queue" would be
    // untrue while the browser is still being checked or the queue not open.
    let title = escape_html(&title);
    fill(
        &files.template,
        &[
            ("{{lang}}", choice.lang),
            ("{{title}}", &title),
            ("{{heading}}", &title),
            ("{{accent}}", &config.accent),
            ("{{noscript}}", noscript),
            ("{{config}}", &data),
            // Checked at build: JSON of strings without '<'.
            ("{{texts}}", builtin),
        ],
    )
}

/// The page's settings for its script (`{{config}}`), a JSON object with
/// its keys in this order; what is absent is left out.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PageData<'a> {
    continue_url: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    form: Option<&'a queuegate_edge::visit::KeptForm>,
    heading: &'a str,
    locale: &'a str,
    queue: &'a str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    signed_in: bool,
    texts: &'a Texts,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_script: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    turnstile: Option<TurnstileData<'a>>,
}

/// Turnstile's script and site key, for the page to render the widget.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct TurnstileData<'a> {
    script: &'a str,
    site_key: &'a str,
}

/// The English title when neither the operator nor the language gives one.
const TITLE_EN: &str = "Waiting room";

/// A language's built-in texts, of which only the title is read here.
#[derive(serde::Deserialize)]
struct BuiltinTitle {
    title: Option<String>,
}

/// The page's `<title>` in its language: the operator's `title` text for
/// it (`PAGE_TEXTS`), else `PAGE_TITLE`, else the language's own
/// (`builtin`, its texts as JSON), else English.
fn title(config: &PageConfig, texts: &Texts, builtin: &str) -> String {
    texts
        .get("title")
        .map(str::to_string)
        .or_else(|| config.title.clone())
        .or_else(|| {
            serde_json::from_str::<BuiltinTitle>(builtin)
                .ok()
                .and_then(|b| b.title)
        })
        .unwrap_or_else(|| TITLE_EN.to_string())
}

/// `template` with each placeholder replaced, in one pass: what is put in
/// is never read again, so operator text that looks like a placeholder
/// stays text.
fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 4_096);
    let mut rest = template;
    while let Some(at) = rest.find("{{") {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        match values.iter().find(|(p, _)| tail.starts_with(p)) {
            Some((p, v)) => {
                out.push_str(v);
                rest = &tail[p.len()..];
            }
            None => {
                out.push_str("{{");
                rest = &tail[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What the page's CSP allows for the shop's token script: the script's
/// full URL (this site's origin and `PAGE_TOKEN_SCRIPT`: a CSP source with
/// a path matches that file only) and the origins it may fetch from.
#[derive(Debug, Clone, Copy)]
pub struct TokenSources<'a> {
    /// `https://shop.example/auth/queuegate-token.js`.
    pub script_url: &'a str,
    /// `PAGE_TOKEN_CONNECT`.
    pub connect: &'a [String],
}

/// The Content-Security-Policy: only our own inline script (by hash),
/// requests to our own origin, no framing. `worker-src blob:` lets that
/// script run its proof-of-work solver in a Web Worker made from a string
/// of its own, so no other script can load. With Turnstile on, exactly
/// what Turnstile documents on top: its script and its frame from its own
/// origin (`turnstile`, Cloudflare's unless a test's stand-in). With a
/// token script (`token`), exactly that file of this site, and the
/// origins it fetches tokens from.
pub fn content_security_policy(
    template: &str,
    turnstile: Option<&str>,
    token: Option<TokenSources<'_>>,
) -> String {
    // One template per isolate (its asset): hashed once.
    static HASH: OnceLock<String> = OnceLock::new();
    let hash = HASH.get_or_init(|| {
        let script = template
            .rsplit_once("<script>")
            .and_then(|(_, rest)| rest.split_once("</script>"))
            .map(|(body, _)| body)
            .unwrap_or_default();
        STANDARD.encode(Sha256::digest(script.as_bytes()))
    });
    let (mut script_from, frames) = match turnstile {
        Some(origin) => (format!(" {origin}"), format!("frame-src {origin}; ")),
        None => (String::new(), String::new()),
    };
    let mut connect = String::new();
    if let Some(t) = token {
        script_from.push(' ');
        script_from.push_str(t.script_url);
        for origin in t.connect {
            connect.push(' ');
            connect.push_str(origin);
        }
    }
    format!(
        "default-src 'none'; script-src 'sha256-{hash}'{script_from}; style-src 'unsafe-inline'; \
         connect-src 'self'{connect}; worker-src blob:; {frames}img-src 'self' data:; base-uri 'none'; \
         form-action 'self'; frame-ancestors 'none'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The template as the build wrote it for the assets.
    const TEMPLATE: &str = include_str!(concat!(env!("OUT_DIR"), "/assets/page/waiting-room.html"));

    fn files() -> Files {
        Files {
            template: Rc::from(TEMPLATE),
            language: Rc::from(include_str!(concat!(
                env!("OUT_DIR"),
                "/assets/page/en.txt"
            ))),
        }
    }

    fn render(
        config: &PageConfig,
        queue: &str,
        back: Option<&str>,
        turnstile: Option<&TurnstileConfig>,
        choice: &Choice,
    ) -> String {
        super::render(&files(), config, queue, back, turnstile, choice, None)
    }

    fn content_security_policy(turnstile: Option<&str>) -> String {
        super::content_security_policy(TEMPLATE, turnstile, None)
    }

    fn en() -> Choice {
        Choice {
            lang: "en",
            locale: "en".into(),
        }
    }

    fn page(pairs: &[(&str, &str)]) -> Result<PageConfig, crate::config::ConfigError> {
        PageConfig::from_pairs(pairs)
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
        let html = render(&c, "main", None, None, &en());
        assert!(html.contains("<title>Drop &lt;b&gt;&amp;&lt;/b&gt;</title>"));
        assert!(
            !html.contains("</script><script>alert"),
            "no script injection"
        );
        assert!(html.contains(r#""queue":"main""#));
        assert!(!html.contains("{{"), "every placeholder filled");
    }

    #[test]
    fn the_page_ships_without_its_script_comments() {
        let written = include_str!("../assets/waiting-room.html");
        let comment = |l: &&str| l.trim_start().starts_with("//");
        assert!(written.lines().filter(comment).count() > 10);
        let script = TEMPLATE.split("<script>").nth(1).unwrap_or_default();
        assert_eq!(script.lines().filter(comment).count(), 0);
        let kept: Vec<&str> = written.lines().filter(|l| !comment(l)).collect();
        assert_eq!(TEMPLATE.lines().collect::<Vec<_>>(), kept);
    }

    #[test]
    fn continue_leads_back_to_the_return_target_else_continue_url() {
        let c = page(&[("CONTINUE_URL", "/checkout")]).unwrap();
        assert!(render(&c, "main", None, None, &en()).contains(r#""continueUrl":"/checkout""#));
        let html = render(
            &c,
            "main",
            Some("/tickets/7?size=M&x=</script>"),
            None,
            &en(),
        );
        assert!(
            html.contains(r#""continueUrl":"/tickets/7?size=M&x=\u003c/script>""#),
            "the return target, JSON-escaped inside the script tag"
        );
    }

    #[test]
    fn the_csp_pins_the_inline_script() {
        let csp = content_security_policy(None);
        assert!(csp.contains("script-src 'sha256-"), "{csp}");
        assert!(csp.contains("connect-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("script-src 'unsafe-inline'") && !csp.contains("unsafe-eval"));
        let script_src = csp.split(';').find(|d| d.trim().starts_with("script-src"));
        assert_eq!(
            script_src.map(|d| d.split_whitespace().count()),
            Some(2),
            "script-src is one hash and nothing else: {csp}"
        );
        // The challenge solver runs in a Worker from a Blob URL, and only there.
        assert!(csp.contains("worker-src blob:;"), "{csp}");
        assert!(!csp.contains("frame-src"), "{csp}");

        // Turnstile on: its script and its frame from its origin, no more.
        let ts = content_security_policy(Some("https://challenges.cloudflare.com"));
        let directive = |name: &str| {
            ts.split(';')
                .map(str::trim)
                .find(|d| d.starts_with(name))
                .map(String::from)
        };
        let script_src = directive("script-src ").unwrap_or_default();
        assert!(
            script_src.ends_with("' https://challenges.cloudflare.com"),
            "{ts}"
        );
        assert_eq!(script_src.split_whitespace().count(), 3, "{ts}");
        assert_eq!(
            directive("frame-src ").as_deref(),
            Some("frame-src https://challenges.cloudflare.com")
        );
        assert!(ts.contains("connect-src 'self';") && ts.contains("default-src 'none';"));
    }

    #[test]
    fn the_page_learns_the_turnstile_site_key_only_when_it_is_on() {
        let c = page(&[]).unwrap();
        assert!(!render(&c, "main", None, None, &en()).contains(r#""turnstile":{"#));
        let t = TurnstileConfig {
            secret: "never shown".into(),
            site_key: "0x4AAA-site".into(),
            verify_url: "https://challenges.cloudflare.com/turnstile/v0/siteverify".into(),
            script_url: "https://challenges.cloudflare.com/turnstile/v0/api.js".into(),
            timeout_ms: 3000,
            fail_open: false,
        };
        let html = render(&c, "main", None, Some(&t), &en());
        assert!(html.contains(
            r#""turnstile":{"script":"https://challenges.cloudflare.com/turnstile/v0/api.js","siteKey":"0x4AAA-site"}"#
        ), "{html}");
        assert!(
            !html.contains("never shown"),
            "the secret stays at the edge"
        );
    }

    #[test]
    fn the_page_solves_challenges_in_a_worker_with_its_texts_in_t() {
        // The solver is built from the hashed script itself (no second file),
        // digests with WebCrypto, and sends the solution in X-Altcha.
        for needle in [
            "new Worker(URL.createObjectURL(new Blob(",
            "crypto.subtle.digest(\"SHA-256\"",
            "\"x-altcha\"",
            "\"/queue/challenge\"",
            "checking: \"",
        ] {
            assert!(TEMPLATE.contains(needle), "the page lacks {needle}");
        }
        // Every visitor's browser loads it (and every isolate reads it
        // once); 24 KiB since it asks for login tokens and wakes up.
        assert!(
            TEMPLATE.len() < 24 * 1024,
            "the page grew to {} bytes",
            TEMPLATE.len()
        );
    }

    #[test]
    fn the_page_knows_the_pre_queue_and_says_what_it_needs() {
        for needle in [
            "case \"pre_queue\"",
            "role=\"timer\"",
            "<noscript>",
            "createOscillator()",
            "Notification.requestPermission(",
        ] {
            assert!(TEMPLATE.contains(needle), "the page lacks {needle}");
        }
        // Permission is asked in one place only: the button's click handler.
        assert_eq!(TEMPLATE.matches("requestPermission(").count(), 1);
        assert_eq!(TEMPLATE.matches("await ask()").count(), 1);
    }

    #[test]
    fn the_title_is_the_operators_else_the_languages_own() {
        let de = || Files {
            template: Rc::from(TEMPLATE),
            language: Rc::from(include_str!(concat!(
                env!("OUT_DIR"),
                "/assets/page/de.txt"
            ))),
        };
        let german = Choice {
            lang: "de",
            locale: "de-DE".into(),
        };
        let title = |c: &PageConfig, files: Files, choice: &Choice| {
            let html = super::render(&files, c, "main", None, None, choice, None);
            let start = html.find("<title>").unwrap() + 7;
            html[start..start + html[start..].find("</title>").unwrap()].to_string()
        };
        let plain = page(&[]).unwrap();
        assert_eq!(title(&plain, files(), &en()), "Waiting room");
        assert_eq!(title(&plain, de(), &german), "Warteraum");
        let named = page(&[("PAGE_TITLE", "Drop & Co")]).unwrap();
        assert_eq!(title(&named, de(), &german), "Drop &amp; Co");
        let own = page(&[
            ("PAGE_TITLE", "Drop"),
            ("PAGE_TEXTS", r#"{"de":{"title":"Drop – Warteraum"}}"#),
        ])
        .unwrap();
        assert_eq!(title(&own, de(), &german), "Drop – Warteraum");
        assert_eq!(title(&own, files(), &en()), "Drop");
    }

    #[test]
    fn a_token_script_is_allowed_as_one_file_and_named_to_the_page() {
        let c = PageConfig::from_pairs(&[
            ("IDENTITY_MODE", "jwt"),
            ("PAGE_TOKEN_SCRIPT", "/auth/qg-token.js"),
            ("PAGE_TOKEN_CONNECT", "https://clerk.shop.example"),
        ])
        .unwrap();
        let html = render(&c, "main", None, None, &en());
        assert!(html.contains(r#""signedIn":true"#), "{html}");
        assert!(
            html.contains(r#""tokenScript":"/auth/qg-token.js""#),
            "{html}"
        );
        let csp = super::content_security_policy(
            TEMPLATE,
            None,
            Some(TokenSources {
                script_url: "https://shop.example/auth/qg-token.js",
                connect: &c.token_connect,
            }),
        );
        let directive = |name: &str| {
            csp.split(';')
                .map(str::trim)
                .find(|d| d.starts_with(name))
                .unwrap_or_default()
                .to_string()
        };
        let script_src = directive("script-src ");
        assert!(script_src.starts_with("script-src 'sha256-"), "{csp}");
        assert!(
            script_src.ends_with("' https://shop.example/auth/qg-token.js"),
            "{csp}"
        );
        assert_eq!(script_src.split_whitespace().count(), 3, "{csp}");
        assert_eq!(
            directive("connect-src "),
            "connect-src 'self' https://clerk.shop.example"
        );
        // Anonymous: nothing of it.
        let plain = render(&page(&[]).unwrap(), "main", None, None, &en());
        assert!(!plain.contains(r#""signedIn""#) && !plain.contains(r#""tokenScript""#));
    }

    #[test]
    fn the_heading_is_neutral_until_the_script_knows_the_state() {
        let c = page(&[("PAGE_TITLE", "Drop day"), ("PAGE_HEADING", "In line")]).unwrap();
        let html = render(&c, "main", None, None, &en());
        assert!(html.contains(r#"<h1 id="heading">Drop day</h1>"#), "{html}");
    }
}
