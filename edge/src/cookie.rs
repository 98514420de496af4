//! Our cookies: every name carries one prefix, so the worker can strip all of
//! them before forwarding; reading a `Cookie` header and writing `Set-Cookie`.

/// The prefix of every cookie the edge sets; spelled once, here.
macro_rules! prefix {
    () => {
        "qg_"
    };
}

/// Prefix of every cookie the edge sets (the origin never sees them).
pub const COOKIE_PREFIX: &str = prefix!();
/// The anonymous visitor cookie: `<id>.<HMAC>`.
pub const VISITOR_COOKIE: &str = concat!(prefix!(), "visitor");
/// The entry token as a cookie (set on admission).
pub const TOKEN_COOKIE: &str = concat!(prefix!(), "token");
/// The visitor's place in a line, `<queue>.<ticket>.<HMAC>`: far from the
/// head the edge answers its polls from it (docs/uncapped-line.md).
pub const PLACE_COOKIE: &str = concat!(prefix!(), "place");

/// A confirmed session, `<queue>.<endsAt>-<checkedS>.<HMAC>`: the
/// session's pages pass without Redis ([`crate::session`]).
pub const SESSION_COOKIE: &str = concat!(prefix!(), "session");

/// A staff bypass link's key for one queue, `<queue>.<key>`
/// (docs/scheduler.md, *Bypass links*).
pub const BYPASS_COOKIE: &str = concat!(prefix!(), "bypass");

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/.
pub fn set_cookie(name: &str, value: &str, max_age_s: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    let max_age = max_age_s.to_string();
    [
        name,
        "=",
        value,
        "; Path=/; Max-Age=",
        &max_age,
        "; HttpOnly; SameSite=Lax",
        secure,
    ]
    .concat()
}

/// A `Set-Cookie` value like [`set_cookie`], but `SameSite=Strict`: the
/// entry token's, so no other site can make the browser spend it (the
/// room's own Continue is a same-site navigation, which sends it).
pub fn set_strict_cookie(name: &str, value: &str, max_age_s: u64, secure: bool) -> String {
    set_cookie(name, value, max_age_s, secure).replace("SameSite=Lax", "SameSite=Strict")
}

/// A `Set-Cookie` value that deletes cookie `name`.
pub fn clear_cookie(name: &str) -> String {
    format!("{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax")
}

/// A `Cookie` header without our cookies, for the origin; None when nothing
/// else is left (then the header is dropped).
pub fn without_ours(header: &str) -> Option<String> {
    let kept: Vec<&str> = header
        .split(';')
        .map(str::trim)
        .filter(|c| !c.starts_with(COOKIE_PREFIX))
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_name() {
        let h = "a=1; qg_visitor=abc.def; qg_token=t";
        assert_eq!(cookie(h, "qg_visitor"), Some("abc.def"));
        assert_eq!(cookie(h, "qg_token"), Some("t"));
        assert_eq!(cookie(h, "qg"), None);
    }

    #[test]
    fn our_names_share_the_prefix() {
        assert_eq!(VISITOR_COOKIE, "qg_visitor");
        assert_eq!(TOKEN_COOKIE, "qg_token");
        for name in [VISITOR_COOKIE, TOKEN_COOKIE] {
            assert!(name.starts_with(COOKIE_PREFIX), "{name}");
        }
    }

    #[test]
    fn only_our_cookies_are_stripped() {
        assert_eq!(
            without_ours("a=1; qg_visitor=v.s;qg_token=t; b=2").as_deref(),
            Some("a=1; b=2")
        );
        assert_eq!(without_ours("qg_visitor=v.s; qg_token=t"), None);
    }

    #[test]
    fn set_cookie_flags() {
        assert_eq!(
            set_cookie("qg_token", "t", 60, true),
            "qg_token=t; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure"
        );
        assert_eq!(
            clear_cookie(VISITOR_COOKIE),
            "qg_visitor=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax"
        );
    }
}
