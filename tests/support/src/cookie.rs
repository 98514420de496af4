//! `Set-Cookie` as a client stores it: the first `name=value` pair, with the
//! attributes (`Path`, `Secure`, `Max-Age`, …) left to the caller.

/// The `(name, value)` one `Set-Cookie` header value sets; None when its
/// first `;`-separated part has no `=`.
pub fn set_cookie_pair(header: &str) -> Option<(&str, &str)> {
    let (name, value) = header.split(';').next()?.split_once('=')?;
    Some((name.trim(), value.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_comes_without_attributes() {
        assert_eq!(
            set_cookie_pair("qg_visitor=abc.def; Path=/; HttpOnly; Secure"),
            Some(("qg_visitor", "abc.def"))
        );
        assert_eq!(
            set_cookie_pair("qg_token=; Max-Age=0"),
            Some(("qg_token", ""))
        );
        assert_eq!(set_cookie_pair("a=b=c"), Some(("a", "b=c")));
        assert_eq!(set_cookie_pair("HttpOnly; a=b"), None);
    }
}
