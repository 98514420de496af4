//! The path and query of a request URL. Parsed by hand because the `url`
//! crate's IDNA tables would double the wasm; request URLs from the runtime
//! are already normalised.

/// The part of an absolute URL after the host: `/path?query` (no fragment).
pub fn path_and_query(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(url, |i| &url[i + 3..]);
    let rest = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    rest.split('#').next().unwrap_or(rest)
}

/// The host (and port) of an absolute URL: `shop.example:8443`.
pub fn host(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(url, |i| &url[i + 3..]);
    let end = after_scheme
        .find(['/', '?', '#'])
        .unwrap_or(after_scheme.len());
    let authority = &after_scheme[..end];
    authority.rsplit_once('@').map_or(authority, |(_, h)| h)
}

/// The origin of an absolute URL (`https://shop.example:8443`), when its
/// scheme is http(s) and its host only the characters a host has (so it
/// can stand in a header such as a CSP as it is).
pub fn origin(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once("://")?;
    let host = host(url);
    let clean = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b));
    (matches!(scheme, "http" | "https") && clean).then(|| format!("{scheme}://{host}"))
}

/// The path of an absolute URL, without the query.
pub fn path(url: &str) -> &str {
    let rest = path_and_query(url);
    rest.split('?').next().unwrap_or(rest)
}

/// The raw value of query parameter `name`, if present (first one wins).
pub fn query_param<'a>(url: &'a str, name: &str) -> Option<&'a str> {
    let query = path_and_query(url).split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_and_host_only_when_clean() {
        assert_eq!(
            origin("https://shop.example:8443/queue?x=1").as_deref(),
            Some("https://shop.example:8443")
        );
        assert_eq!(
            origin("http://127.0.0.1:8787/queue").as_deref(),
            Some("http://127.0.0.1:8787")
        );
        assert_eq!(
            origin("https://[::1]:9/").as_deref(),
            Some("https://[::1]:9")
        );
        for bad in [
            "ftp://a.example/",
            "https://a;b.example/",
            "https:///x",
            "nothing",
        ] {
            assert_eq!(origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn urls_split_without_the_url_crate() {
        let u = "https://shop.example/orders/7?queue=drop&x=1#frag";
        assert_eq!(path_and_query(u), "/orders/7?queue=drop&x=1");
        assert_eq!(query_param(u, "queue"), Some("drop"));
        assert_eq!(query_param(u, "x"), Some("1"));
        assert_eq!(query_param(u, "y"), None);
        assert_eq!(path_and_query("http://127.0.0.1:8787"), "/");
        assert_eq!(path(u), "/orders/7");
        assert_eq!(path("http://127.0.0.1:8787"), "/");
        assert_eq!(path("http://h/queue/position?queue=a?b"), "/queue/position");
        assert_eq!(query_param("http://h/p?queue", "queue"), Some(""));
        assert_eq!(host(u), "shop.example");
        assert_eq!(host("http://127.0.0.1:8787"), "127.0.0.1:8787");
        assert_eq!(host("http://[::1]:8787/x"), "[::1]:8787");
        assert_eq!(host("https://u:p@shop.example?x"), "shop.example");
    }
}
