//! Forwarding to the origin: `ORIGIN_URL` + path, or the request's own URL
//! on a route. Our headers and cookies are stripped; gate-passed requests get
//! signed identity headers; redirects are passed back, not followed.

use queuegate_edge::cookie::without_ours;
use queuegate_edge::{signing, url, TOKEN_HEADER};
use queuegate_shared::{QueueId, UserId};
use worker::{
    AbortSignal, Date, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Response,
};

use crate::error::EdgeError;
use crate::http::{self, js_err};

/// Whether a client header goes on to the origin: not `Host`, not the entry
/// token, and no `X-Queuegate-*` a client could forge.
pub fn forwards_header(lower_name: &str) -> bool {
    lower_name != "host"
        && lower_name != TOKEN_HEADER
        && !lower_name.starts_with(signing::HEADER_PREFIX)
}

/// A forwarded request's answer, and when the origin had all of the
/// request, to tell the origin's latency from the visitor's upload.
#[derive(Debug)]
pub struct Forwarded {
    /// The origin's answer (or why there is none).
    pub reply: Result<Response, EdgeError>,
    /// When the request left with its body in hand (epoch ms). `None`: the
    /// visitor's body never arrived whole, so a failure is the visitor's.
    pub in_hand: Option<u64>,
}

/// The origin's answer to `req`. `base` is `ORIGIN_URL` (None: the request's
/// own URL); `passed` the queue and user of a request that passed the gate,
/// signed with `secret`. After `timeout_ms` the runtime aborts the
/// subrequest (its reply's body too, if that is still arriving).
pub async fn forward(
    base: Option<&str>,
    secret: &[u8],
    timeout_ms: u64,
    mut req: Request,
    passed: Option<(&QueueId, &UserId)>,
) -> Forwarded {
    let mut in_hand = None;
    let reply = send(base, secret, timeout_ms, &mut req, passed, &mut in_hand).await;
    Forwarded { reply, in_hand }
}

async fn send(
    base: Option<&str>,
    secret: &[u8],
    timeout_ms: u64,
    req: &mut Request,
    passed: Option<(&QueueId, &UserId)>,
    in_hand: &mut Option<u64>,
) -> Result<Response, EdgeError> {
    let own_url = req.inner().url();
    let target = match base {
        Some(base) => format!("{base}{}", url::path_and_query(&own_url)),
        None => own_url.clone(),
    };
    let headers = scrubbed(req)?;
    let method = req.method();
    if let Some((queue, user)) = passed {
        sign(&headers, secret, queue, user, &method, &req.path())?;
    }
    let mut init = RequestInit::new();
    init.with_method(method.clone())
        .with_headers(headers)
        .with_redirect(RequestRedirect::Manual);
    if !matches!(method, Method::Get | Method::Head) {
        let body = req.bytes().await.map_err(js_err)?;
        if !body.is_empty() {
            let array = worker::js_sys::Uint8Array::from(body.as_slice());
            init.with_body(Some(array.into()));
        }
    }
    // The clock moves across I/O in Workers: this is after the upload.
    *in_hand = Some(Date::now().as_millis());
    let outbound = Request::new_with_init(&target, &init).map_err(js_err)?;
    let signal = AbortSignal::from(worker::web_sys::AbortSignal::timeout_with_u32(
        u32::try_from(timeout_ms).unwrap_or(u32::MAX),
    ));
    Fetch::Request(outbound)
        .send_with_signal(&signal)
        .await
        .map_err(|e| match signal.aborted() {
            true => EdgeError::OriginTimeout(timeout_ms),
            false => EdgeError::OriginUnreachable(e.to_string()),
        })
}

/// The request's headers without ours (see [`forwards_header`]) and without
/// our cookies.
fn scrubbed(req: &Request) -> Result<Headers, EdgeError> {
    let headers = Headers::new();
    for (name, value) in req.headers().entries() {
        let lower = name.to_ascii_lowercase();
        if !forwards_header(&lower) {
            continue;
        }
        if lower == "cookie" {
            if let Some(kept) = without_ours(&value) {
                http::set(&headers, "cookie", &kept)?;
            }
            continue;
        }
        http::append(&headers, &name, &value)?;
    }
    Ok(headers)
}

/// Adds the signed identity headers (README "Origin verification").
fn sign(
    headers: &Headers,
    secret: &[u8],
    queue: &QueueId,
    user: &UserId,
    method: &Method,
    path: &str,
) -> Result<(), EdgeError> {
    let now = Date::now().as_millis();
    let sig = signing::sign(
        secret,
        queue.as_str(),
        user.as_str(),
        now,
        method.as_ref(),
        path,
    );
    http::set(headers, signing::USER_HEADER, user.as_str())?;
    http::set(headers, signing::QUEUE_HEADER, queue.as_str())?;
    http::set(headers, signing::TIME_HEADER, &now.to_string())?;
    http::set(headers, signing::SIGNATURE_HEADER, &sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_headers_stay_behind() {
        for name in ["host", "x-entry-token", "x-queuegate-user", "x-queuegate-x"] {
            assert!(!forwards_header(name), "{name}");
        }
        for name in ["cookie", "content-type", "authorization", "x-queue"] {
            assert!(forwards_header(name), "{name}");
        }
    }
}
