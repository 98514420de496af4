//! Sent to the room and back: a person who opens a protected page without
//! an entry token is sent to the waiting room with the path they wanted,
//! and the room's Continue leads back there (README, "Deploying").
//!
//! Only the path travels, never a host: the return target is checked to be
//! a path on this site, so the room can never be used to send a visitor
//! elsewhere (an open redirect).

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// The longest return target kept (characters, decoded). A longer wanted path is
/// dropped from the redirect (the room's Continue then leads to
/// `CONTINUE_URL`), and a longer `return` is refused.
pub const MAX_RETURN: usize = 2_048;

/// What a `return` value is encoded with in the room's address: everything
/// but unreserved characters and `/`, so `?`, `&`, `=` and `#` of the
/// wanted path stay inside the one parameter.
const RETURN_VALUE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~')
    .remove(b'/');

/// Whether a request's `Accept` prefers an HTML page to JSON: `text/html`
/// (or `application/xhtml+xml`) is named with a higher `q` than
/// `application/json`. A browser's navigation or form submission names
/// `text/html` first; `fetch()` and API clients send `*/*` or ask for JSON,
/// and keep getting JSON. Wildcards never count as a preference for HTML.
pub fn prefers_html(accept: Option<&str>) -> bool {
    let Some(accept) = accept else {
        return false;
    };
    let (mut html, mut json) = (0, 0);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1_000), |v| thousandths(v.trim()))
            .unwrap_or(0);
        match media.as_str() {
            "text/html" | "application/xhtml+xml" => html = html.max(q),
            "application/json" => json = json.max(q),
            _ => {}
        }
    }
    html > 0 && html > json
}

/// A `q` value in thousandths (`0`, `0.8`, `1.000`; RFC 9110 allows three
/// decimals), by hand: parsing floats would cost the wasm its float code.
/// `None` for anything else, which then counts as `q=0`.
pub(crate) fn thousandths(q: &str) -> Option<u16> {
    let (whole, frac) = q.split_once('.').unwrap_or((q, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scaled = frac.bytes().chain(std::iter::repeat(b'0')).take(3);
    let frac = scaled.fold(0u16, |n, b| n * 10 + u16::from(b - b'0'));
    match whole {
        "0" => Some(frac),
        "1" if frac == 0 => Some(1_000),
        _ => None,
    }
}

/// Why a `return` target was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReturnError {
    /// Not valid percent-encoded UTF-8.
    #[error("`return` is not valid percent-encoded UTF-8")]
    Encoding,
    /// Over [`MAX_RETURN`] characters.
    #[error("`return` is longer than 2,048 characters")]
    TooLong,
    /// Not a path on this site: no leading `/`, a `//` or `/\` (another
    /// host), a backslash, a space or a control character (which browsers
    /// drop or rewrite, turning a path into another host).
    #[error("`return` must be a path on this site, like /checkout")]
    NotAPath,
    /// The waiting room itself.
    #[error("`return` must not lead back to the waiting room")]
    Room,
}

/// The return target of a room URL's `return` parameter (raw, as in the
/// query): decoded and checked to be a path on this site.
pub fn return_target(raw: &str) -> Result<String, ReturnError> {
    // `+` is a space in a form-encoded query; a path has no use for one.
    let decoded = percent_decode_str(raw)
        .decode_utf8()
        .map_err(|_| ReturnError::Encoding)?;
    check_path(&decoded)?;
    Ok(decoded.into_owned())
}

/// Whether `path` (decoded) may be a return target: a path on this site,
/// not the room, within [`MAX_RETURN`].
pub fn is_return_target(path: &str) -> bool {
    check_path(path).is_ok()
}

fn check_path(path: &str) -> Result<(), ReturnError> {
    // Counted in characters, as the API's `maxLength` counts them.
    if path.chars().count() > MAX_RETURN {
        return Err(ReturnError::TooLong);
    }
    let b = path.as_bytes();
    let bad_byte = |c: &u8| c.is_ascii_control() || c.is_ascii_whitespace() || *c == b'\\';
    if b.first() != Some(&b'/') || b.get(1) == Some(&b'/') || b.iter().any(bad_byte) {
        return Err(ReturnError::NotAPath);
    }
    let route = path.split(['?', '#']).next().unwrap_or(path);
    if route == "/queue" || route.starts_with("/queue/") {
        return Err(ReturnError::Room);
    }
    Ok(())
}

/// The waiting room's address for a person who wanted `wanted` (the path
/// and query of their request) on `queue`'s protected route: the room's
/// page with `return` set, or without it when the wanted path would not be
/// a valid return target (too long, or odd bytes the runtime let through).
pub fn room_location(queue: &str, wanted: &str) -> String {
    let page = format!("/queue?queue={}", utf8_percent_encode(queue, RETURN_VALUE));
    match check_path(wanted) {
        Ok(()) => format!(
            "{page}&return={}",
            utf8_percent_encode(wanted, RETURN_VALUE)
        ),
        Err(_) => page,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_navigating_prefer_html_and_api_clients_do_not() {
        // Chromium's and Firefox's navigation Accept.
        let chromium = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7";
        assert!(prefers_html(Some(chromium)));
        assert!(prefers_html(Some(
            "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        )));
        assert!(prefers_html(Some("application/xhtml+xml")));
        assert!(prefers_html(Some("TEXT/HTML; charset=utf-8")));
        // fetch(), curl and API clients.
        for accept in [
            "*/*",
            "application/json",
            "application/json, text/plain, */*",
            "text/*",
            "",
            "text/html;q=0",
            "text/html;q=0.5, application/json",
            "text/html, application/json",
            "text/html;q=abc, application/json",
        ] {
            assert!(!prefers_html(Some(accept)), "{accept:?}");
        }
        assert!(!prefers_html(None));
        assert!(prefers_html(Some("application/json;q=0.4, text/html")));
        assert!(!prefers_html(Some("text/html;q=2")), "not a q value");
        assert!(prefers_html(Some("text/html;q=0.001")));
        assert!(prefers_html(Some(
            "text/html;q=0.9, application/json;q=0.85"
        )));
        assert!(!prefers_html(Some(
            "text/html;q=0.8, application/json;q=0.800"
        )));
    }

    #[test]
    fn q_values_in_thousandths() {
        for (q, want) in [
            ("1", Some(1_000)),
            ("1.000", Some(1_000)),
            ("0", Some(0)),
            ("0.8", Some(800)),
            ("0.85", Some(850)),
            ("0.123", Some(123)),
            ("0.", Some(0)),
            ("1.5", None),
            ("2", None),
            ("0.1234", None),
            ("-0", None),
            ("abc", None),
            ("", None),
        ] {
            assert_eq!(thousandths(q), want, "{q:?}");
        }
    }

    #[test]
    fn return_targets_are_paths_on_this_site() {
        assert_eq!(return_target("/checkout").as_deref(), Ok("/checkout"));
        assert_eq!(
            return_target("%2Ftickets%2F7%3Fsize%3DM%26n%3D2").as_deref(),
            Ok("/tickets/7?size=M&n=2")
        );
        assert_eq!(return_target("/caf%C3%A9").as_deref(), Ok("/café"));
        for (raw, why) in [
            ("https://evil.example/", ReturnError::NotAPath),
            ("//evil.example/", ReturnError::NotAPath),
            ("%2F%2Fevil.example", ReturnError::NotAPath),
            ("/\\evil.example", ReturnError::NotAPath),
            ("/%5Cevil.example", ReturnError::NotAPath),
            // Browsers strip tabs and newlines from URLs: "/\t/x" is "//x".
            ("/%09/evil.example", ReturnError::NotAPath),
            ("/%0A/evil.example", ReturnError::NotAPath),
            ("/%20/evil.example", ReturnError::NotAPath),
            ("javascript:alert(1)", ReturnError::NotAPath),
            ("checkout", ReturnError::NotAPath),
            ("", ReturnError::NotAPath),
            ("/queue", ReturnError::Room),
            ("/queue?queue=main", ReturnError::Room),
            ("/queue/enter", ReturnError::Room),
            ("%FF", ReturnError::Encoding),
        ] {
            assert_eq!(return_target(raw), Err(why), "{raw:?}");
        }
        assert!(return_target("/queued").is_ok(), "only the room itself");
        let long = format!("/{}", "a".repeat(MAX_RETURN));
        assert_eq!(return_target(&long), Err(ReturnError::TooLong));
        assert!(return_target(&long[..MAX_RETURN]).is_ok());
        // Characters, not bytes: 2,048 two-byte characters still fit.
        let wide = format!("/{}", "é".repeat(MAX_RETURN - 1));
        assert!(return_target(&wide).is_ok());
    }

    #[test]
    fn the_room_location_carries_the_wanted_path_as_one_parameter() {
        let loc = room_location("main", "/tickets/7?size=M&n=2");
        assert_eq!(
            loc,
            "/queue?queue=main&return=/tickets/7%3Fsize%3DM%26n%3D2"
        );
        let raw = loc.split_once("&return=").map(|(_, r)| r).unwrap_or("");
        assert_eq!(return_target(raw).as_deref(), Ok("/tickets/7?size=M&n=2"));
        // What cannot come back is left out: the room's Continue then leads
        // to CONTINUE_URL.
        assert_eq!(room_location("main", "//x"), "/queue?queue=main");
        let long = format!("/{}", "a".repeat(MAX_RETURN));
        assert_eq!(room_location("main", &long), "/queue?queue=main");
    }
}
