//! Forwarding to the origin: `ORIGIN_URL` + path, or the request's own URL
//! on a route. Our headers and cookies are stripped; gate-passed requests get
//! signed identity headers; redirects are passed back, not followed.
//!
//! The subrequest is built and sent in one call into JS ([`js::origin_fetch`]):
//! the visitor's headers are copied there, by the rules decided here
//! ([`forwards_header`], [`without_ours`]), with no crossing per header, and
//! without workers-rs' `Request`, `Fetch` and `Response`, whose conversions
//! and streams were a tenth of the wasm's gzipped size (BENCHMARKS.md,
//! "Worker wasm size").

use queuegate_edge::cookie::without_ours;
use queuegate_edge::{signing, url, TOKEN_HEADER};
use queuegate_shared::{QueueId, UserId};
use worker::js_sys::{Array, Promise};
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{web_sys, Method};

use crate::error::EdgeError;
use crate::http::Request;

/// Client headers that never reach the origin by name: `Host` and the
/// entry token.
const DROPPED: [&str; 2] = ["host", TOKEN_HEADER];

/// Whether a client header goes on to the origin: not `Host`, not the entry
/// token, and no `X-Queuegate-*` a client could forge.
pub fn forwards_header(lower_name: &str) -> bool {
    !DROPPED.contains(&lower_name) && !lower_name.starts_with(signing::HEADER_PREFIX)
}

/// A forwarded request's answer, and when the origin had all of the
/// request, to tell the origin's latency from the visitor's upload.
#[derive(Debug)]
pub struct Forwarded {
    /// The origin's answer (or why there is none).
    pub reply: Result<web_sys::Response, EdgeError>,
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
    req: &Request,
    passed: Option<(&QueueId, &UserId)>,
) -> Forwarded {
    let own_url = req.inner().url();
    let target = match base {
        Some(base) => format!("{base}{}", url::path_and_query(&own_url)),
        None => own_url.clone(),
    };
    let method = req.method();
    let signed = passed.map_or_else(String::new, |(queue, user)| {
        signed_headers(secret, queue, user, &method, &req.path())
    });
    let cookie = match req.cookies() {
        "" => None,
        all => without_ours(all),
    };
    // A body goes on only with a method that has one; its declared length
    // (-1: none) keeps the upload's framing.
    let body = !matches!(method, Method::Get | Method::Head);
    let length = req
        .headers()
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|l| l.trim().parse::<u64>().ok())
        .map_or(-1.0, |l| l as f64);
    let sent = crate::clock::now_ms();
    let started = js::origin_fetch(
        req.raw(),
        &target,
        cookie.as_deref().unwrap_or_default(),
        &signed,
        &DROPPED.join("\n"),
        signing::HEADER_PREFIX,
        u32::try_from(timeout_ms).unwrap_or(u32::MAX),
        body,
        length,
        READ_AHEAD_BYTES,
    );
    let (reply, ended) = match started {
        // Not sent: ours, never the origin's, and never counted.
        Err(e) => {
            let why = e.as_string().unwrap_or_else(|| format!("{e:?}"));
            return Forwarded {
                reply: Err(EdgeError::Internal(format!("forward: {why}"))),
                in_hand: None,
                sent: None,
            };
        }
        Ok(pair) => (pair.get(0), pair.get(1).dyn_into::<Promise>().ok()),
    };
    let reply = match reply.dyn_into::<Promise>() {
        Ok(promise) => JsFuture::from(promise)
            .await
            .map_err(|e| match e.as_string().filter(|why| !why.is_empty()) {
                Some(why) => EdgeError::OriginUnreachable(why),
                None => EdgeError::OriginTimeout(timeout_ms),
            })
            .and_then(|r| {
                r.dyn_into::<web_sys::Response>()
                    .map_err(|_| EdgeError::Internal("the origin's reply is no Response".into()))
            }),
        Err(_) => Err(EdgeError::Internal("the forward gave no promise".into())),
    };
    let in_hand = match ended {
        None => Some(sent),
        Some(ended) => body_end(&ended).await.map(|end| end.max(sent)),
    };
    Forwarded {
        reply,
        in_hand,
        sent: Some(sent),
    }
}

/// When the visitor's body was read to its end (epoch ms), if it has been
/// by now; None while it is still arriving, or if it broke off.
async fn body_end(ended: &Promise) -> Option<u64> {
    let race = Promise::race(&Array::of2(ended, &Promise::resolve(&JsValue::NULL)));
    let at = JsFuture::from(race).await.ok()?.as_f64()?;
    (at.is_finite() && at > 0.0).then_some(at as u64)
}

/// The signed identity headers (README "Origin verification"), their names
/// and values one a line, alternating.
fn signed_headers(
    secret: &[u8],
    queue: &QueueId,
    user: &UserId,
    method: &Method,
    path: &str,
) -> String {
    let now = crate::clock::now_ms();
    let sig = signing::sign(
        secret,
        queue.as_str(),
        user.as_str(),
        now,
        method.as_ref(),
        path,
    );
    [
        (signing::USER_HEADER, user.as_str()),
        (signing::QUEUE_HEADER, queue.as_str()),
        (signing::TIME_HEADER, &now.to_string()),
        (signing::SIGNATURE_HEADER, &sig),
    ]
    .iter()
    .map(|(name, value)| format!("{name}\n{value}"))
    .collect::<Vec<_>>()
    .join("\n")
}

/// The subrequest's JS side.
mod js {
    use worker::{js_sys, wasm_bindgen, web_sys};

    #[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function origin_fetch(req, target, cookie, signed, dropped, prefix, timeoutMs, withBody, length, readAhead) {
  const drop = dropped.split("\n");
  const headers = new Headers();
  for (const [name, value] of req.headers) {
    if (name === "cookie" || drop.includes(name) || name.startsWith(prefix)) continue;
    headers.append(name, value);
  }
  if (cookie) headers.set("cookie", cookie);
  const s = signed ? signed.split("\n") : [];
  for (let i = 1; i < s.length; i += 2) headers.set(s[i - 1], s[i]);
  const signal = AbortSignal.timeout(timeoutMs);
  const init = { method: req.method, headers, redirect: "manual", signal };
  let ended = null;
  if (withBody && req.body) {
    const strategy = { highWaterMark: readAhead };
    const pass = length >= 0
      ? new FixedLengthStream(length, strategy)
      : new IdentityTransformStream(strategy);
    ended = req.body.pipeTo(pass.writable).then(Date.now, Number);
    init.body = pass.readable;
  }
  const reply = fetch(target, init).catch((e) => {
    throw signal.aborted ? "" : String((e && e.message) || e || "fetch failed");
  });
  return [reply, ended];
}
"#)]
    extern "C" {
        /// Sends `req` to `target` with its headers but the `dropped` ones
        /// (a name a line), those starting with `prefix` and its cookies,
        /// `cookie` instead (when not empty) and the `signed` headers
        /// (names and values a line, alternating); a redirect is passed
        /// back; aborted after `timeoutMs`. With `withBody`, its body
        /// streams through a stream of `length` bytes (-1: unknown) that
        /// reads `readAhead` bytes ahead. Gives `[reply, ended]`: the
        /// reply's promise (rejected with the error's message, or an empty
        /// string at the deadline) and, for a body, the promise of the time
        /// it was read to its end (NaN if it broke off), else null.
        #[wasm_bindgen(catch)]
        #[allow(clippy::too_many_arguments)]
        pub fn origin_fetch(
            req: &web_sys::Request,
            target: &str,
            cookie: &str,
            signed: &str,
            dropped: &str,
            prefix: &str,
            timeout_ms: u32,
            with_body: bool,
            length: f64,
            read_ahead: u32,
        ) -> Result<js_sys::Array, wasm_bindgen::JsValue>;
    }
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
