//! Forwarding to the origin: `ORIGIN_URL` + path, or the request's own URL
//! on a route. Our headers and cookies are stripped; gate-passed requests get
//! signed identity headers; redirects are passed back, not followed.

use queuegate_edge::cookie::without_ours;
use queuegate_edge::{signing, url, TOKEN_HEADER};
use queuegate_shared::{QueueId, UserId};
use worker::js_sys::{self, Array, Function, Object, Promise, Reflect};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, AbortSignal, Fetch, Headers, Method, Request, Response};

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
    /// When the request was out with its body in hand (epoch ms): the later
    /// of sending it and reading the visitor's body to its end. `None`:
    /// the body had not been read whole (the visitor was still uploading,
    /// or broke off) when the origin answered or the forward failed, so a
    /// failure is the visitor's.
    pub in_hand: Option<u64>,
    /// When it was sent (epoch ms); `None`: it never was.
    pub sent: Option<u64>,
}

/// Bytes of the visitor's body the pass-through stream holds ahead of
/// the origin reading them: a small body is read whole at once, so its end
/// is known even if the origin never reads it (it is down); a large body
/// streams, at most this much of it held at a time.
const READ_AHEAD_BYTES: u32 = 256 * 1024;

/// The origin's answer to `req`. `base` is `ORIGIN_URL` (None: the request's
/// own URL); `passed` the queue and user of a request that passed the gate,
/// signed with `secret`. The body streams to the origin as it arrives
/// (never whole in the isolate). After `timeout_ms` (from sending, upload
/// included) the runtime aborts the subrequest (its reply's body too, if
/// that is still arriving).
pub async fn forward(
    base: Option<&str>,
    secret: &[u8],
    timeout_ms: u64,
    req: Request,
    passed: Option<(&QueueId, &UserId)>,
) -> Forwarded {
    let mut ended = None;
    let reply = send(base, secret, timeout_ms, &req, passed, &mut ended).await;
    // `send` sets `ended` only once it sends; a failure before that is
    // ours, never the origin's, and never counted: `in_hand` stays None.
    let (sent, in_hand) = match ended {
        None => (None, None),
        Some(BodyEnd::NoBody(at)) => (Some(at), Some(at)),
        Some(BodyEnd::Stream { sent, ended }) => {
            (Some(sent), body_end(&ended).await.map(|end| end.max(sent)))
        }
    };
    Forwarded {
        reply,
        in_hand,
        sent,
    }
}

/// The forwarded request's body, as far as timing goes.
enum BodyEnd {
    /// No body: in hand when sent (epoch ms).
    NoBody(u64),
    /// A streamed body: sent at `sent`; `ended` resolves to the epoch ms its
    /// last chunk was read from the visitor, or NaN if it broke off.
    Stream { sent: u64, ended: Promise },
}

async fn send(
    base: Option<&str>,
    secret: &[u8],
    timeout_ms: u64,
    req: &Request,
    passed: Option<(&QueueId, &UserId)>,
    ended: &mut Option<BodyEnd>,
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
    // The runtime's own RequestInit: workers-rs' would bring its `cf`
    // serializer into the wasm for a request that sets none.
    let init = web_sys::RequestInit::new();
    init.set_method(method.as_ref());
    init.set_headers(&headers.0);
    init.set_redirect(web_sys::RequestRedirect::Manual);
    let body = match method {
        Method::Get | Method::Head => None,
        _ => req.inner().body(),
    };
    let timed = match body {
        Some(body) => {
            let length = req
                .headers()
                .get("content-length")
                .ok()
                .flatten()
                .and_then(|l| l.trim().parse::<u64>().ok());
            let (readable, ended) = timed_body(&body, length)?;
            init.set_body(&readable);
            Some(ended)
        }
        None => None,
    };
    let outbound: Request = web_sys::Request::new_with_str_and_init(&target, &init)
        .map_err(|e| js_err(e.into()))?
        .into();
    let signal = AbortSignal::from(worker::web_sys::AbortSignal::timeout_with_u32(
        u32::try_from(timeout_ms).unwrap_or(u32::MAX),
    ));
    let now = crate::clock::now_ms();
    *ended = Some(match timed {
        Some(ended) => BodyEnd::Stream { sent: now, ended },
        None => BodyEnd::NoBody(now),
    });
    Fetch::Request(outbound)
        .send_with_signal(&signal)
        .await
        .map_err(|e| match signal.aborted() {
            true => EdgeError::OriginTimeout(timeout_ms),
            false => EdgeError::OriginUnreachable(e.to_string()),
        })
}

/// `body` piped into the runtime's native pass-through stream (bytes move
/// inside the runtime, never through JS or wasm; up to [`READ_AHEAD_BYTES`]
/// held): a `FixedLengthStream` of the visitor's Content-Length `length`
/// (the origin's request keeps it), an `IdentityTransformStream` without
/// one (chunked). Also a promise of when the visitor's body was read to its
/// end: the pipe's promise, mapped by the runtime's own `Date.now`
/// (fulfilled) and `Number` (rejected, giving NaN), so there is no Rust
/// callback to keep alive or leak.
fn timed_body(
    body: &worker::web_sys::ReadableStream,
    length: Option<u64>,
) -> Result<(JsValue, Promise), EdgeError> {
    let global = js_sys::global();
    let get = |target: &JsValue, name: &str| {
        Reflect::get(target, &JsValue::from_str(name))
            .map_err(|e| EdgeError::Internal(format!("{name}: {e:?}")))
    };
    let function = |target: &JsValue, name: &str| -> Result<Function, EdgeError> {
        get(target, name)?
            .dyn_into::<Function>()
            .map_err(|_| EdgeError::Internal(format!("{name} is not a function")))
    };
    let strategy = Object::new();
    Reflect::set(
        &strategy,
        &JsValue::from_str("highWaterMark"),
        &JsValue::from(READ_AHEAD_BYTES),
    )
    .map_err(|e| EdgeError::Internal(format!("highWaterMark: {e:?}")))?;
    let (name, args) = match length {
        Some(length) => (
            "FixedLengthStream",
            Array::of2(&JsValue::from_f64(length as f64), &strategy),
        ),
        None => ("IdentityTransformStream", Array::of1(&strategy)),
    };
    let pass = Reflect::construct(&function(&global, name)?, &args)
        .map_err(|e| EdgeError::Internal(format!("{name}: {e:?}")))?;
    let piped = function(body, "pipeTo")?
        .call1(body, &get(&pass, "writable")?)
        .map_err(|e| EdgeError::Internal(format!("pipeTo: {e:?}")))?;
    let date = get(&global, "Date")?;
    let ended = function(&piped, "then")?
        .call2(&piped, &get(&date, "now")?, &get(&global, "Number")?)
        .map_err(|e| EdgeError::Internal(format!("then: {e:?}")))?
        .dyn_into::<Promise>()
        .map_err(|_| EdgeError::Internal("then gave no promise".into()))?;
    Ok((get(&pass, "readable")?, ended))
}

/// When the body was read to its end, if it was by now (a settled promise
/// wins a race against an already resolved one; a pending one does not).
async fn body_end(ended: &Promise) -> Option<u64> {
    let race = Promise::race(&Array::of2(ended, &Promise::resolve(&JsValue::NULL)));
    let at = JsFuture::from(race).await.ok()?.as_f64()?;
    (at.is_finite() && at > 0.0).then_some(at as u64)
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
    let now = crate::clock::now_ms();
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
