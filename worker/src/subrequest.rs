//! Small subrequests whose reply is text (the login service's key set,
//! Turnstile's siteverify), made in one call into JS through the runtime's
//! own `fetch`, as [`crate::rest`] makes its Redis calls. workers-rs'
//! `RequestInit` would bring its `cf` properties' serializer into the wasm
//! (~3 KB gzipped) for requests that never set one.

use worker::js_sys;
use worker::wasm_bindgen;
use worker::wasm_bindgen_futures::JsFuture;

#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function fetch_text(url, method, contentType, body, timeoutMs, maxBytes) {
  const signal = AbortSignal.timeout(timeoutMs);
  const init = { method, signal };
  if (contentType) init.headers = { "content-type": contentType };
  if (body) init.body = body;
  return fetch(url, init).then((r) => {
    const length = Number(r.headers.get("content-length"));
    const cache = r.headers.get("cache-control") || "";
    if (r.status !== 200 || length > maxBytes) {
      if (r.body) r.body.cancel();
      return r.status + " " + (length > maxBytes ? "L" : "-") + cache + "\n";
    }
    return r.text().then((text) => r.status + " -" + cache + "\n" + text);
  }).catch((e) => {
    throw signal.aborted ? "" : String((e && e.message) || "fetch failed");
  });
}
"#)]
extern "C" {
    /// Resolves to `"<status> <L|-><cache-control>\n<body>"` (`L`: the
    /// announced length is over `max_bytes`, the body is not read; nor is
    /// it for a status other than 200); rejects with the error's message,
    /// or an empty string at the deadline.
    fn fetch_text(
        url: &str,
        method: &str,
        content_type: &str,
        body: &str,
        timeout_ms: u32,
        max_bytes: u32,
    ) -> js_sys::Promise;
}

/// A text reply.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// Its `Cache-Control`, if any (empty without).
    pub cache_control: String,
    /// The body (empty unless the status is 200 and it fits).
    pub text: String,
    /// The announced `Content-Length` was over the limit.
    pub too_large: bool,
}

/// `method` `url` with `body` (none when empty) of `content_type`, bounded
/// by `timeout_ms`. Errors say why in words.
pub async fn text(
    method: &str,
    url: &str,
    content_type: &str,
    body: &str,
    timeout_ms: u32,
    max_bytes: usize,
) -> Result<Reply, String> {
    let max = u32::try_from(max_bytes).unwrap_or(u32::MAX);
    let reply = JsFuture::from(fetch_text(url, method, content_type, body, timeout_ms, max))
        .await
        .map_err(|e| match e.as_string().filter(|why| !why.is_empty()) {
            Some(why) => why,
            None => format!("no answer within {timeout_ms} ms"),
        })?
        .as_string()
        .ok_or("the reply is not text")?;
    parse(&reply).ok_or_else(|| "the reply could not be read".to_string())
}

fn parse(reply: &str) -> Option<Reply> {
    let (head, text) = reply.split_once('\n')?;
    let (status, rest) = head.split_once(' ')?;
    let too_large = rest.starts_with('L');
    Some(Reply {
        status: status.parse().ok()?,
        cache_control: rest.get(1..)?.to_string(),
        text: text.to_string(),
        too_large,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_split_into_status_cache_control_and_body() {
        let r = parse("200 -max-age=600, public\n{\"keys\":[]}\nmore").unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.cache_control, "max-age=600, public");
        assert_eq!(r.text, "{\"keys\":[]}\nmore");
        assert!(!r.too_large);
        let r = parse("200 L\n").unwrap();
        assert!(r.too_large);
        assert_eq!(r.text, "");
        let r = parse("503 -\n").unwrap();
        assert_eq!((r.status, r.cache_control.as_str()), (503, ""));
        assert!(parse("nonsense").is_none());
    }
}
