//! Small pieces of HTTP shared by the routes: JSON replies, headers, and
//! the error reply. With `app`, `origin`, `visitor` and `rest`, the only
//! modules that touch JS-backed types.

use queuegate_edge::cookie::{clear_cookie, VISITOR_COOKIE};
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
        if let Some(allow) = e.allow() {
            set(resp.headers(), "allow", &allow)?;
        }
        if matches!(e, EdgeError::IdentityInvalid(_)) {
            // Drop the bad visitor cookie, so the next enter mints a new one.
            append(resp.headers(), "set-cookie", &clear_cookie(VISITOR_COOKIE))?;
        }
        Ok(resp)
    };
    build().map_err(|inner| worker::Error::RustError(inner.to_string()))
}
