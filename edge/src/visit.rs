//! What a request to a protected route is, before the gate decides
//! (README, *Browse and spend routes*): the path it is matched by, and
//! whether the visitor asked for it at all.
//!
//! * [`match_path`] — the path as an origin would route it: decoded, dot
//!   segments resolved, slashes collapsed, case folded, so `/Tickets/7`,
//!   `/tickets/./7`, `//tickets/7` and `/%74ickets/7` cannot skip a gate
//!   that `/tickets/7` meets.
//! * [`Intent`] — a prefetch or prerender (the browser guessing) never
//!   spends a turn; a cross-site request never carries one.

use percent_encoding::percent_decode_str;

/// The longest path normalised (bytes); a longer one is matched as the
/// empty path, which no rule matches… so it is refused instead (see
/// [`match_path`]).
pub const MAX_PATH: usize = 8_192;

/// The path a protected route is matched against: percent-decoded once
/// (as the origin decodes it), backslashes as slashes, `;params` dropped
/// from each segment (Tomcat and Spring route `/orders;x` as `/orders`),
/// empty and `.` segments dropped, `..` taking the one before it, ASCII
/// lower case (Unicode case tables would cost the wasm ~10 KB; rules are
/// ASCII paths), no trailing slash (`/` stays `/`). `None` for a path longer than
/// [`MAX_PATH`]: the gate refuses it rather than guess.
pub fn match_path(path: &str) -> Option<String> {
    if path.len() > MAX_PATH {
        return None;
    }
    let decoded = percent_decode_str(path).decode_utf8_lossy();
    let mut segments: Vec<String> = Vec::new();
    for raw in decoded.split(['/', '\\']) {
        let segment = raw.split(';').next().unwrap_or("");
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s.to_ascii_lowercase()),
        }
    }
    Some(format!("/{}", segments.join("/")))
}

/// How a request to a protected route came to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Intent {
    /// A prefetch or prerender: `Sec-Purpose` (`prefetch`, `prefetch;
    /// prerender`), `Purpose: prefetch`, `X-Purpose: preview`, `X-Moz:
    /// prefetch` or Next.js's `Next-Router-Prefetch`. It never spends a
    /// token, opens a session or renews one.
    pub prefetch: bool,
    /// `Sec-Fetch-Site: cross-site`: another site made the browser send
    /// it (a link, a form, an image). Its cookies are not the visitor's
    /// intent, so it carries no token; a session still lets a page load.
    pub cross_site: bool,
}

impl Intent {
    /// Reads the headers through `header` (case-insensitive names).
    pub fn of<'a>(header: impl Fn(&str) -> Option<&'a str>) -> Intent {
        let has = |name: &str, word: &str| {
            header(name).is_some_and(|v| {
                v.split([';', ',', ' '])
                    .any(|w| w.trim().eq_ignore_ascii_case(word))
            })
        };
        let prefetch = has("sec-purpose", "prefetch")
            || has("sec-purpose", "prerender")
            || has("purpose", "prefetch")
            || has("x-purpose", "preview")
            || has("x-moz", "prefetch")
            || header("next-router-prefetch").is_some();
        let cross_site =
            header("sec-fetch-site").is_some_and(|v| v.trim().eq_ignore_ascii_case("cross-site"));
        Intent {
            prefetch,
            cross_site,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_of_one_path_match_alike() {
        for p in [
            "/tickets/7",
            "/Tickets/7",
            "/tickets/./7",
            "//tickets//7",
            "/tickets/7/",
            "/%74ickets/7",
            "/TICKETS/%37",
            "/x/../tickets/7",
            "\\tickets\\7",
            "/tickets;jsessionid=1/7",
            "/tickets/%2e/7",
            "/tickets/x/%2e%2e/7",
        ] {
            assert_eq!(match_path(p).as_deref(), Some("/tickets/7"), "{p}");
        }
        assert_eq!(match_path("/").as_deref(), Some("/"));
        assert_eq!(match_path("/../..").as_deref(), Some("/"));
        assert_eq!(match_path("/orders%2Fx").as_deref(), Some("/orders/x"));
        // Decoded once, like the origin: %252e stays the text `%2e`.
        assert_eq!(
            match_path("/a/%252e%252e/b").as_deref(),
            Some("/a/%2e%2e/b")
        );
        assert_eq!(match_path(&"/a".repeat(MAX_PATH)), None);
    }

    fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<&'a str> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }

    #[test]
    fn a_prefetch_is_told_by_any_of_its_headers() {
        for pair in [
            ("sec-purpose", "prefetch"),
            ("sec-purpose", "prefetch;prerender"),
            ("sec-purpose", "Prefetch; anonymous-client-ip"),
            ("purpose", "prefetch"),
            ("x-purpose", "preview"),
            ("x-moz", "prefetch"),
            ("next-router-prefetch", "1"),
        ] {
            assert!(Intent::of(headers(&[pair])).prefetch, "{pair:?}");
        }
        assert_eq!(Intent::of(headers(&[])), Intent::default());
        assert!(!Intent::of(headers(&[("purpose", "navigate")])).prefetch);
        assert!(!Intent::of(headers(&[("sec-purpose", "prefetchx")])).prefetch);
    }

    #[test]
    fn only_another_site_is_cross_site() {
        let site = |v| Intent::of(headers(&[("sec-fetch-site", v)])).cross_site;
        assert!(site("cross-site"));
        assert!(site("Cross-Site"));
        for v in ["same-origin", "same-site", "none"] {
            assert!(!site(v), "{v}");
        }
    }
}

/// The largest form body kept through the room (bytes): a checkout form's
/// fields, not an upload.
pub const MAX_KEPT_FORM: usize = 16 * 1024;

/// The most fields a kept form may have.
pub const MAX_KEPT_FIELDS: usize = 256;

/// A person's form `POST` that must go through the room first: its action
/// and fields, which the room's page sends again (same method, same body)
/// on Continue instead of letting a 303 turn it into a `GET` (README,
/// *Browse and spend routes*).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeptForm {
    /// Where it was sent: the path and query.
    pub action: String,
    /// Its fields in order, decoded.
    pub fields: Vec<(String, String)>,
}

/// Whether a form `POST` may be kept: `application/x-www-form-urlencoded`
/// (what a plain `<form method=post>` sends; a file upload's multipart
/// body is not kept), with a `Content-Length` within [`MAX_KEPT_FORM`],
/// sent by this site's own page (`Sec-Fetch-Site: same-origin`): another
/// site's form kept and re-sent with the visitor's token on Continue would
/// be a forged order.
pub fn keeps_form(
    content_type: Option<&str>,
    content_length: Option<&str>,
    fetch_site: Option<&str>,
) -> bool {
    let urlencoded = content_type.is_some_and(|t| {
        t.split(';').next().is_some_and(|m| {
            m.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
    });
    let small = content_length
        .and_then(|n| n.trim().parse::<usize>().ok())
        .is_some_and(|n| n <= MAX_KEPT_FORM);
    let own = fetch_site.is_some_and(|s| s.trim().eq_ignore_ascii_case("same-origin"));
    urlencoded && small && own
}

/// The fields of an urlencoded body (`+` as space, percent-decoded; bytes
/// that are not UTF-8 read as U+FFFD, as a browser's form parser reads
/// them), or `None` when it is too big or has too many fields.
pub fn form_fields(body: &str) -> Option<Vec<(String, String)>> {
    if body.len() > MAX_KEPT_FORM {
        return None;
    }
    let fields: Vec<(String, String)> = form_urlencoded::parse(body.as_bytes())
        .take(MAX_KEPT_FIELDS + 1)
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    (fields.len() <= MAX_KEPT_FIELDS).then_some(fields)
}

#[cfg(test)]
mod form_tests {
    use super::*;

    #[test]
    fn only_a_small_urlencoded_form_of_our_own_is_kept() {
        let form = Some("application/x-www-form-urlencoded; charset=UTF-8");
        let own = Some("same-origin");
        assert!(keeps_form(form, Some("120"), own));
        assert!(!keeps_form(form, Some("120"), Some("cross-site")));
        assert!(!keeps_form(form, Some("120"), Some("same-site")));
        assert!(!keeps_form(form, Some("120"), None));
        assert!(!keeps_form(form, None, own), "a chunked body");
        assert!(!keeps_form(form, Some("16385"), own));
        assert!(!keeps_form(
            Some("multipart/form-data; boundary=x"),
            Some("120"),
            own
        ));
        assert!(!keeps_form(Some("application/json"), Some("12"), own));
    }

    #[test]
    fn fields_are_decoded_in_order() {
        assert_eq!(
            form_fields("seat=A+12&qty=2&note=caf%C3%A9%26more&empty=&flag").unwrap(),
            vec![
                ("seat".into(), "A 12".into()),
                ("qty".into(), "2".into()),
                ("note".into(), "café&more".into()),
                ("empty".into(), String::new()),
                ("flag".into(), String::new()),
            ]
        );
        assert_eq!(form_fields("").unwrap(), vec![]);
        assert_eq!(
            form_fields("a=%FF").unwrap(),
            vec![("a".into(), "\u{FFFD}".into())]
        );
        assert_eq!(form_fields(&"a=1&".repeat(300)), None);
        assert_eq!(form_fields(&"a".repeat(MAX_KEPT_FORM + 1)), None);
    }
}
