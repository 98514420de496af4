//! Small pieces of HTTP shared by the routes: JSON replies with headers,
//! cookies, and the error reply. The only module besides `app` and `rest`
//! that touches JS-backed types.

use worker::{Headers, Response};

use crate::error::EdgeError;

/// A JSON reply with `Cache-Control: no-store` (queue state is personal).
pub fn json(status: u16, body: &serde_json::Value) -> Result<Response, EdgeError> {
    let headers = Headers::new();
    set(&headers, "content-type", "application/json; charset=utf-8")?;
    set(&headers, "cache-control", "no-store")?;
    Ok(Response::from_bytes(body.to_string().into_bytes())
        .map_err(js_err)?
        .with_status(status)
        .with_headers(headers))
}

/// Sets a header on a reply we built.
pub fn set(headers: &Headers, name: &str, value: &str) -> Result<(), EdgeError> {
    headers.set(name, value).map_err(js_err)
}

/// Adds a header (Set-Cookie may repeat).
pub fn append(headers: &Headers, name: &str, value: &str) -> Result<(), EdgeError> {
    headers.append(name, value).map_err(js_err)
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, Path=/.
pub fn cookie(name: &str, value: &str, max_age_s: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!("{name}={value}; Path=/; Max-Age={max_age_s}; HttpOnly; SameSite=Lax{secure}")
}

/// Turns a JS-side failure into an internal error.
pub fn js_err(e: worker::Error) -> EdgeError {
    EdgeError::Internal(e.to_string())
}

/// The reply for an error. It fails only if the JS runtime itself does,
/// and then the runtime answers 500.
pub fn error_response(e: &EdgeError) -> worker::Result<Response> {
    if e.is_server_fault() {
        worker::console_error!("{} {}: {e}", e.status(), e.code());
    }
    let build = || -> Result<Response, EdgeError> {
        let resp = json(e.status(), &e.body())?;
        if let Some(s) = e.retry_after_s() {
            set(resp.headers(), "retry-after", &s.to_string())?;
        }
        if let EdgeError::MethodNotAllowed { allow } = e {
            set(resp.headers(), "allow", allow)?;
        }
        if matches!(e, EdgeError::IdentityInvalid(_)) {
            // Drop the bad visitor cookie, so the next enter mints a new one.
            let clear = format!(
                "{}=; Path=/; Max-Age=0; HttpOnly; SameSite=Lax",
                crate::identity::VISITOR_COOKIE
            );
            append(resp.headers(), "set-cookie", &clear)?;
        }
        Ok(resp)
    };
    build().map_err(|inner| worker::Error::RustError(inner.to_string()))
}

/// The part of an absolute URL after the host: `/path?query` (no fragment).
/// Parsed by hand because the `url` crate's IDNA tables would double the
/// wasm; request URLs from the runtime are already normalised.
pub fn path_and_query(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(url, |i| &url[i + 3..]);
    let rest = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    rest.split('#').next().unwrap_or(rest)
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
    fn urls_split_without_the_url_crate() {
        let u = "https://shop.example/orders/7?queue=drop&x=1#frag";
        assert_eq!(path_and_query(u), "/orders/7?queue=drop&x=1");
        assert_eq!(query_param(u, "queue"), Some("drop"));
        assert_eq!(query_param(u, "x"), Some("1"));
        assert_eq!(query_param(u, "y"), None);
        assert_eq!(path_and_query("http://127.0.0.1:8787"), "/");
        assert_eq!(query_param("http://h/p?queue", "queue"), Some(""));
    }
}
