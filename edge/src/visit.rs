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
