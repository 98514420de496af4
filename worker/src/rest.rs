//! The Upstash REST protocol over the runtime's `fetch` (the one
//! `worker::Fetch` wraps, called directly: docs/edge.md says why): one POST
//! per script call, EVALSHA first and EVAL once on NOSCRIPT, aborted at a
//! timeout.
//! Request bodies and reply parsing are plain functions, tested on the host.

use queuegate_shared::refusal::Refusal;
use queuegate_shared::{Invocation, Operation, Value};

use crate::config::RedisRest;
use crate::error::EdgeError;

/// A failed REST call, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestError {
    /// No answer: network error or timeout.
    Unreachable(String),
    /// 401/403: the REST token is wrong.
    Auth(u16),
    /// The script is not cached (retry with EVAL).
    NoScript,
    /// The database refused for one of its plan's limits (requests,
    /// connections, request size, capacity): Upstash's `ERR max …
    /// exceeded` replies, or HTTP 413/429.
    Limit(String),
    /// Redis refused the command without running it (`OOM`, `BUSY`, …).
    Refused(Refusal, String),
    /// Redis answered with an error.
    Redis(String),
    /// Not the Upstash reply shape.
    Protocol(String),
}

impl From<RestError> for EdgeError {
    fn from(e: RestError) -> Self {
        match e {
            RestError::Unreachable(why) => EdgeError::RedisUnavailable(why),
            RestError::Auth(status) => EdgeError::RedisUnavailable(format!(
                "REST auth refused ({status}): check UPSTASH_REDIS_REST_TOKEN"
            )),
            RestError::Limit(why) => EdgeError::RedisLimited(why),
            RestError::NoScript => EdgeError::Internal("NOSCRIPT after EVAL".into()),
            RestError::Refused(refusal, detail) => EdgeError::RedisRefused { refusal, detail },
            RestError::Redis(msg) => EdgeError::Internal(format!("redis error: {msg}")),
            RestError::Protocol(msg) => EdgeError::Internal(format!("REST protocol: {msg}")),
        }
    }
}

/// `["EVALSHA", sha, numkeys, keys..., args...]`.
pub fn evalsha_body(inv: &Invocation) -> String {
    script_body("EVALSHA", inv.script.sha1(), inv)
}

/// `["EVAL", source, numkeys, keys..., args...]`.
pub fn eval_body(inv: &Invocation, source: &str) -> String {
    script_body("EVAL", source, inv)
}

/// Where a script's text is among the worker's assets.
pub fn script_asset(inv: &Invocation) -> String {
    format!("lua/{}.lua", inv.script.name())
}

/// The command as a JSON array of strings, written straight to text (no
/// `serde_json::Value` built on the way: it was a tenth of the Rust time
/// of a poll).
fn script_body(cmd: &str, script: &str, inv: &Invocation) -> String {
    let numkeys = inv.keys.len().to_string();
    let parts: Vec<&str> = [cmd, script, numkeys.as_str()]
        .into_iter()
        .chain(inv.keys.iter().map(String::as_str))
        .chain(inv.args.iter().map(String::as_str))
        .collect();
    // Serializing strings cannot fail.
    serde_json::to_string(&parts).unwrap_or_default()
}

/// Parses an Upstash reply (`{"result": …}` or `{"error": "…"}`).
pub fn parse_reply(status: u16, body: &str) -> Result<Value, RestError> {
    if status == 401 || status == 403 {
        return Err(RestError::Auth(status));
    }
    if status == 413 || status == 429 {
        return Err(RestError::Limit(format!("REST endpoint answered {status}")));
    }
    // 5xx is the endpoint's own trouble (Redis down behind it, overload):
    // unreachable, whatever the body says. Redis errors come as 400.
    if status >= 500 {
        return Err(RestError::Unreachable(format!(
            "REST endpoint answered {status}"
        )));
    }
    let reply: Reply = serde_json::from_str(body)
        .map_err(|_| RestError::Protocol(format!("status {status}, body is not JSON")))?;
    if let Some(msg) = reply.error {
        if msg.starts_with("NOSCRIPT") {
            return Err(RestError::NoScript);
        }
        if is_limit(&msg) {
            return Err(RestError::Limit(msg));
        }
        if let Some(refusal) = Refusal::of_message(&msg) {
            return Err(RestError::Refused(refusal, msg));
        }
        return Err(RestError::Redis(msg));
    }
    match reply.result {
        Some(Decoded(result)) => Ok(result),
        None => Err(RestError::Protocol(format!(
            "status {status}, no result field"
        ))),
    }
}

/// Whether a Redis error is one of Upstash's plan limits: `ERR max requests
/// limit exceeded`, `ERR max concurrent connections exceeded`, `ERR max
/// request size exceeded`, `ERR max daily request limit exceeded`, `ERR DB
/// capacity quota exceeded` (Upstash's troubleshooting pages name them).
/// A script's own error never starts so.
fn is_limit(msg: &str) -> bool {
    (msg.starts_with("ERR max ") && msg.contains(" exceeded"))
        || msg.starts_with("ERR DB capacity quota exceeded")
}

/// The reply's envelope. Other fields are ignored.
#[derive(serde::Deserialize)]
struct Reply {
    /// Present (and maybe `null`) on success.
    #[serde(default, deserialize_with = "present")]
    result: Option<Decoded>,
    error: Option<String>,
}

/// `result: null` is a nil reply, not a missing one.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Decoded>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// A result, decoded straight into the shared [`Value`]: strings stay text
/// (we never ask for base64), `null` is nil, a boolean is 0/1, a number
/// that is not an integer keeps its text, an object (never sent by a
/// script) is nil.
struct Decoded(Value);

impl<'de> serde::Deserialize<'de> for Decoded {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ResultVisitor).map(Decoded)
    }
}

struct ResultVisitor;

impl<'de> serde::de::Visitor<'de> for ResultVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a Redis reply")
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Nil)
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Int(i64::from(b)))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Int(i))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(i64::try_from(u).map_or_else(|_| Value::Data(u.to_string().into_bytes()), Value::Int))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Data(f.to_string().into_bytes()))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::Data(s.as_bytes().to_vec()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::Data(s.into_bytes()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(Decoded(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        while map
            .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
            .is_some()
        {}
        Ok(Value::Nil)
    }
}

/// A client for one REST endpoint. Built once per isolate (see `lib.rs`),
/// so the URL and the `Authorization` value are formatted once, not per call.
#[derive(Clone)]
pub struct RestClient {
    url: String,
    authorization: String,
    timeout_ms: u32,
}

impl std::fmt::Debug for RestClient {
    // The token never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestClient")
            .field("url", &self.url)
            .field("timeout_ms", &self.timeout_ms)
            .finish_non_exhaustive()
    }
}

impl RestClient {
    /// A client for `endpoint` with a per-call timeout.
    pub fn new(endpoint: RedisRest, timeout_ms: u64) -> Self {
        RestClient {
            url: format!("{}/", endpoint.url),
            authorization: format!("Bearer {}", endpoint.token),
            timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
        }
    }

    /// Runs a script operation: one HTTP request (two on NOSCRIPT, after
    /// which the script's text is read from the worker's assets once per
    /// isolate).
    pub async fn run<O: Operation>(&self, op: &O) -> Result<O::Reply, EdgeError> {
        let inv = op.invocation();
        let value = match self.post(&evalsha_body(&inv)).await {
            Err(RestError::NoScript) => {
                let source = crate::assets::text(&script_asset(&inv)).await?;
                self.post(&eval_body(&inv, &source)).await?
            }
            other => other?,
        };
        op.decode(value)
            .map_err(|e| EdgeError::Internal(e.to_string()))
    }

    /// `HMGET key fields…`: one value per field (None where absent).
    pub async fn hmget(
        &self,
        key: &str,
        fields: &[&str],
    ) -> Result<Vec<Option<String>>, RestError> {
        let parts: Vec<&str> = ["HMGET", key]
            .into_iter()
            .chain(fields.iter().copied())
            .collect();
        // Serializing strings cannot fail.
        let body = serde_json::to_string(&parts).unwrap_or_default();
        match self.post(&body).await? {
            Value::Array(items) => Ok(items
                .into_iter()
                .map(|v| match v {
                    Value::Data(d) => String::from_utf8(d).ok(),
                    _ => None,
                })
                .collect()),
            other => Err(RestError::Protocol(format!("HMGET answered {other:?}"))),
        }
    }

    /// `GET key`: its text (None when absent or not UTF-8).
    pub async fn get(&self, key: &str) -> Result<Option<String>, RestError> {
        // Serializing strings cannot fail.
        let body = serde_json::to_string(&["GET", key]).unwrap_or_default();
        match self.post(&body).await? {
            Value::Data(d) => Ok(String::from_utf8(d).ok()),
            Value::Nil => Ok(None),
            other => Err(RestError::Protocol(format!("GET answered {other:?}"))),
        }
    }

    /// `ZSCORE key member` as a whole number (None when absent).
    pub async fn zscore(&self, key: &str, member: &str) -> Result<Option<u64>, RestError> {
        // Serializing strings cannot fail.
        let body = serde_json::to_string(&["ZSCORE", key, member]).unwrap_or_default();
        match self.post(&body).await? {
            Value::Data(d) => Ok(std::str::from_utf8(&d)
                .ok()
                .and_then(|t| t.parse::<f64>().ok())
                .map(|f| f as u64)),
            Value::Int(i) => Ok(u64::try_from(i).ok()),
            Value::Nil => Ok(None),
            other => Err(RestError::Protocol(format!("ZSCORE answered {other:?}"))),
        }
    }

    /// `PING`, for health.
    pub async fn ping(&self) -> Result<(), RestError> {
        match self.post(r#"["PING"]"#).await? {
            Value::Data(d) if d == b"PONG" => Ok(()),
            other => Err(RestError::Protocol(format!("PING answered {other:?}"))),
        }
    }

    /// One POST through the runtime's own `fetch`, in one call into JS
    /// ([`js::rest_post`]): the request, its headers and its deadline are
    /// built there, the reply read with the runtime's `Response.text()`, and
    /// the Rust future is woken once, not once per promise. The deadline is
    /// an `AbortController` aborted by a timer: at the deadline the runtime
    /// aborts the subrequest itself, connection and body, instead of a Rust
    /// timer that only stops waiting and leaves the fetch running. The
    /// timer is cleared once the reply is in (`AbortSignal.timeout`, whose
    /// timer runs on, cost an exact poll about 5 % more CPU: BENCHMARKS.md,
    /// issue 35).
    async fn post(&self, body: &str) -> Result<Value, RestError> {
        use worker::wasm_bindgen_futures::JsFuture;

        let reply = JsFuture::from(js::rest_post(
            &self.url,
            &self.authorization,
            body,
            self.timeout_ms,
        ))
        .await
        .map_err(|e| match e.as_string().filter(|why| !why.is_empty()) {
            Some(why) => RestError::Unreachable(why),
            None => RestError::Unreachable(format!("no answer within {} ms", self.timeout_ms)),
        })?
        .as_string()
        .ok_or_else(|| RestError::Protocol("reply is not text".into()))?;
        let (status, text) = split_reply(&reply)?;
        parse_reply(status, text)
    }
}

/// Splits [`js::rest_post`]'s `"<status> <body>"`.
fn split_reply(reply: &str) -> Result<(u16, &str), RestError> {
    reply
        .split_once(' ')
        .and_then(|(status, text)| Some((status.parse().ok()?, text)))
        .ok_or_else(|| RestError::Protocol("reply has no status".into()))
}

/// The REST call's JS side. Each value crossing between wasm and JS costs
/// glue (a string copied, a handle kept), and that glue was a third of the
/// worker's CPU per request (BENCHMARKS.md, "The worker under workerd"):
/// here the whole subrequest is one crossing each way.
mod js {
    use worker::{js_sys, wasm_bindgen};

    #[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
export function rest_post(url, authorization, body, timeoutMs) {
  const abort = new AbortController();
  const signal = abort.signal;
  const deadline = setTimeout(() => abort.abort(), timeoutMs);
  const init = {
    method: "POST",
    headers: { authorization, "content-type": "application/json" },
    body,
    signal,
  };
  return fetch(url, init).then(
    (r) => r.text().then((text) => {
      clearTimeout(deadline);
      return r.status + " " + text;
    }),
  ).catch((e) => {
    clearTimeout(deadline);
    throw signal.aborted ? "" : String((e && e.message) || "fetch failed");
  });
}
"#)]
    extern "C" {
        /// POSTs `body` to `url`; resolves to `"<status> <body>"`, rejects
        /// with the error's message, or an empty string at the deadline.
        pub fn rest_post(
            url: &str,
            authorization: &str,
            body: &str,
            timeout_ms: u32,
        ) -> js_sys::Promise;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::ops::Position;
    use queuegate_shared::{Prefix, QueueId, QueueKeys, UserId};

    #[test]
    fn bodies_carry_sha_or_source_keys_and_args() {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main").unwrap());
        let user = UserId::new("u1").unwrap();
        let inv = Position {
            keys: &keys,
            user: &user,
        }
        .invocation();
        let body: serde_json::Value = serde_json::from_str(&evalsha_body(&inv)).unwrap();
        let arr = body.as_array().unwrap();
        assert_eq!(arr[0], "EVALSHA");
        assert_eq!(arr[1], inv.script.sha1());
        assert_eq!(arr[2], inv.keys.len().to_string());
        assert_eq!(arr.len(), 3 + inv.keys.len() + inv.args.len());
        let eval: Vec<String> =
            serde_json::from_str(&eval_body(&inv, inv.script.source())).unwrap();
        assert_eq!(eval[1], inv.script.source());
        let strings: Vec<String> = serde_json::from_str(&evalsha_body(&inv)).unwrap();
        assert_eq!(strings[3..3 + inv.keys.len()], inv.keys[..]);
        assert_eq!(strings[3 + inv.keys.len()..], inv.args[..]);
    }

    #[test]
    fn plan_limits_are_told_apart_from_redis_errors() {
        for (status, body) in [
            (
                400,
                r#"{"error":"ERR max requests limit exceeded. Limit: 10000, Usage: 10000"}"#,
            ),
            (
                400,
                r#"{"error":"ERR max concurrent connections exceeded"}"#,
            ),
            (400, r#"{"error":"ERR max request size exceeded"}"#),
            (400, r#"{"error":"ERR max daily request limit exceeded"}"#),
            (400, r#"{"error":"ERR DB capacity quota exceeded"}"#),
            (
                413,
                r#"{"error":"ERR request body is larger than 10 bytes"}"#,
            ),
            (429, ""),
        ] {
            let e = parse_reply(status, body).unwrap_err();
            assert!(matches!(e, RestError::Limit(_)), "{status} {body}: {e:?}");
            let edge = EdgeError::from(e);
            assert_eq!((edge.status(), edge.code()), (503, "unavailable"));
        }
        for msg in [
            "ERR wrong number of arguments",
            "ERR max_active must be set",
            "user_script:1: max exceeded",
        ] {
            let body = format!(r#"{{"error":"{msg}"}}"#);
            assert!(
                matches!(parse_reply(400, &body), Err(RestError::Redis(_))),
                "{msg}"
            );
        }
    }

    #[test]
    fn refusals_are_503_with_a_retry_after_and_name_what_to_fix() {
        for (body, refusal) in [
            (
                r#"{"error":"OOM command not allowed when used memory > 'maxmemory'."}"#,
                Refusal::OutOfMemory,
            ),
            (
                r#"{"error":"BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."}"#,
                Refusal::Busy,
            ),
            (
                r#"{"error":"READONLY You can't write against a read only replica."}"#,
                Refusal::ReadOnly,
            ),
            (
                r#"{"error":"LOADING Redis is loading the dataset in memory"}"#,
                Refusal::Loading,
            ),
        ] {
            let e = parse_reply(400, body).unwrap_err();
            assert!(
                matches!(&e, RestError::Refused(r, _) if *r == refusal),
                "{body}: {e:?}"
            );
            let edge = EdgeError::from(e);
            assert_eq!((edge.status(), edge.code()), (503, "unavailable"));
            assert_eq!(
                edge.retry_after_s(),
                Some(crate::error::UNAVAILABLE_RETRY_AFTER_S)
            );
            // The log line (the error's text) names the refusal and the
            // fix; the reply's body says neither.
            let logged = edge.to_string();
            assert!(logged.contains(refusal.as_str()), "{logged}");
            assert!(logged.contains(refusal.advice()), "{logged}");
            let body = serde_json::to_string(&edge.body()).unwrap();
            assert!(!body.contains(refusal.advice()), "{body}");
            assert!(!body.contains("Redis"), "{body}");
        }
    }

    #[test]
    fn the_js_reply_splits_into_status_and_body() {
        assert_eq!(
            split_reply("200 {\"result\":1}"),
            Ok((200, "{\"result\":1}"))
        );
        assert_eq!(split_reply("502 "), Ok((502, "")));
        assert!(matches!(split_reply("oops"), Err(RestError::Protocol(_))));
    }

    #[test]
    fn replies_are_classified() {
        assert_eq!(
            parse_reply(200, r#"{"result":["waiting",3,"open","",null]}"#),
            Ok(Value::Array(vec![
                Value::Data(b"waiting".to_vec()),
                Value::Int(3),
                Value::Data(b"open".to_vec()),
                Value::Data(Vec::new()),
                Value::Nil,
            ]))
        );
        assert_eq!(
            parse_reply(
                400,
                r#"{"error":"NOSCRIPT No matching script. Please use EVAL."}"#
            ),
            Err(RestError::NoScript)
        );
        assert!(matches!(
            parse_reply(400, r#"{"error":"ERR x"}"#),
            Err(RestError::Redis(_))
        ));
        assert_eq!(
            parse_reply(401, r#"{"error":"Unauthorized"}"#),
            Err(RestError::Auth(401))
        );
        assert!(matches!(
            parse_reply(502, "<html>"),
            Err(RestError::Unreachable(_))
        ));
        assert!(matches!(
            parse_reply(503, "{}"),
            Err(RestError::Unreachable(_))
        ));
        assert!(matches!(
            parse_reply(200, "{}"),
            Err(RestError::Protocol(_))
        ));
        assert!(matches!(
            parse_reply(200, "not json"),
            Err(RestError::Protocol(_))
        ));
    }

    #[test]
    fn results_decode_into_shared_values() {
        let value = |body: &str| parse_reply(200, body).unwrap();
        assert_eq!(value(r#"{"result":null}"#), Value::Nil);
        assert_eq!(
            value(r#"{"result":"OK","extra":1}"#),
            Value::Data(b"OK".to_vec())
        );
        assert_eq!(value(r#"{"result":-7}"#), Value::Int(-7));
        assert_eq!(value(r#"{"result":true}"#), Value::Int(1));
        assert_eq!(value(r#"{"result":1.5}"#), Value::Data(b"1.5".to_vec()));
        assert_eq!(
            value(r#"{"result":18446744073709551615}"#),
            Value::Data(b"18446744073709551615".to_vec())
        );
        assert_eq!(value(r#"{"result":{"a":[1]}}"#), Value::Nil);
        assert_eq!(
            value(r#"{"result":[["a\"\u00e9",1],[],null]}"#),
            Value::Array(vec![
                Value::Array(vec![Value::Data("a\"é".as_bytes().to_vec()), Value::Int(1)]),
                Value::Array(vec![]),
                Value::Nil,
            ])
        );
    }
}
