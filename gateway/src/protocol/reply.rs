//! Redis replies as Upstash JSON: nil → null, integers → numbers, strings →
//! strings, arrays nested. With `Upstash-Encoding: base64` every string is
//! base64 (binary-safe), except a top-level `OK` status, which
//! @upstash/redis (pkg/http.ts `decode`) passes through undecoded.

use axum::http::HeaderMap;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use redis::Value;
use serde_json::Value as Json;

/// How string results are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON strings; bytes that are not UTF-8 are replaced (U+FFFD).
    Plain,
    /// Base64 of the raw bytes.
    Base64,
}

impl Encoding {
    /// `Upstash-Encoding: base64` (case-insensitive) selects base64.
    pub fn from_headers(headers: &HeaderMap) -> Encoding {
        let base64 = headers
            .get("upstash-encoding")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("base64"));
        if base64 {
            Encoding::Base64
        } else {
            Encoding::Plain
        }
    }

    fn bytes(self, bytes: Vec<u8>) -> Json {
        match self {
            Encoding::Base64 => Json::String(BASE64.encode(bytes)),
            Encoding::Plain => Json::String(match String::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
            }),
        }
    }

    fn text(self, text: String) -> Json {
        match self {
            Encoding::Base64 => Json::String(BASE64.encode(text)),
            Encoding::Plain => Json::String(text),
        }
    }
}

/// One command's outcome: the `{"result"}` or `{"error"}` of a reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The reply as JSON.
    Result(Json),
    /// Redis's error text.
    Error(String),
}

impl Outcome {
    /// A top-level reply: an error reply becomes [`Outcome::Error`].
    pub fn from_reply(value: Value, encoding: Encoding) -> Outcome {
        match value {
            Value::ServerError(err) => Outcome::Error(server_error_text(&err)),
            other => Outcome::Result(reply_json(other, encoding)),
        }
    }

    /// `{"result": …}` or `{"error": "…"}`.
    pub fn into_json(self) -> Json {
        match self {
            Outcome::Result(result) => serde_json::json!({ "result": result }),
            Outcome::Error(error) => serde_json::json!({ "error": error }),
        }
    }
}

/// Redis's own error line, e.g. `ERR wrong number of arguments for 'get'
/// command` (redis-rs splits it into code and detail; `Display` would
/// rename the code).
pub fn server_error_text(err: &redis::ServerError) -> String {
    match err.details() {
        Some(detail) => format!("{} {detail}", err.code()),
        None => err.code().to_string(),
    }
}

/// A top-level reply as the JSON `result`.
pub fn reply_json(value: Value, encoding: Encoding) -> Json {
    match value {
        // The one string the client leaves undecoded, and only at the top.
        Value::Okay => Json::String("OK".into()),
        other => nested_json(other, encoding),
    }
}

fn nested_json(value: Value, encoding: Encoding) -> Json {
    let array = |items: Vec<Value>| {
        Json::Array(
            items
                .into_iter()
                .map(|v| nested_json(v, encoding))
                .collect(),
        )
    };
    match value {
        Value::Nil => Json::Null,
        Value::Int(n) => Json::from(n),
        Value::BulkString(bytes) => encoding.bytes(bytes),
        Value::SimpleString(text) => encoding.text(text),
        Value::Okay => encoding.text("OK".into()),
        Value::Array(items) | Value::Set(items) => array(items),
        Value::Map(pairs) => array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect()),
        Value::Attribute { data, .. } => nested_json(*data, encoding),
        Value::Double(f) => serde_json::Number::from_f64(f)
            .map(Json::Number)
            .unwrap_or_else(|| encoding.text(f.to_string())),
        Value::Boolean(b) => Json::from(i64::from(b)),
        Value::VerbatimString { text, .. } => encoding.text(text),
        Value::BigNumber(digits) => encoding.bytes(digits),
        Value::Push { data, .. } => array(data),
        // Errors inside arrays (EXEC, Lua tables) keep Redis's text.
        Value::ServerError(err) => encoding.text(server_error_text(&err)),
        // Value is non-exhaustive; a future kind is shown, not dropped.
        other => encoding.text(format!("{other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_replies() {
        let value = Value::Array(vec![
            Value::Nil,
            Value::Int(-3),
            Value::BulkString(b"v".to_vec()),
            Value::Array(vec![Value::SimpleString("PONG".into())]),
        ]);
        assert_eq!(
            reply_json(value, Encoding::Plain),
            json!([null, -3, "v", ["PONG"]])
        );
        assert_eq!(reply_json(Value::Okay, Encoding::Plain), json!("OK"));
    }

    #[test]
    fn base64_keeps_top_level_ok_and_encodes_everything_else() {
        assert_eq!(reply_json(Value::Okay, Encoding::Base64), json!("OK"));
        assert_eq!(
            reply_json(Value::SimpleString("PONG".into()), Encoding::Base64),
            json!("UE9ORw==")
        );
        // Inside arrays the client decodes every string, "OK" included.
        assert_eq!(
            reply_json(
                Value::Array(vec![Value::Okay, Value::Int(1), Value::Nil]),
                Encoding::Base64
            ),
            json!(["T0s=", 1, null])
        );
    }

    #[test]
    fn binary_survives_base64_and_is_replaced_in_plain() {
        let bytes = vec![0xff, 0x00, 0xfe];
        assert_eq!(
            reply_json(Value::BulkString(bytes.clone()), Encoding::Base64),
            json!("/wD+")
        );
        assert_eq!(
            reply_json(Value::BulkString(bytes), Encoding::Plain),
            json!("\u{fffd}\u{0}\u{fffd}")
        );
    }

    #[test]
    fn error_text_is_redis_own() {
        let reply = Value::ServerError(sample_error(
            "ERR wrong number of arguments for 'get' command",
        ));
        assert_eq!(
            Outcome::from_reply(reply, Encoding::Plain),
            Outcome::Error("ERR wrong number of arguments for 'get' command".into())
        );
    }

    /// A server error as the parser builds it from a RESP error line.
    fn sample_error(line: &str) -> redis::ServerError {
        let resp = format!("-{line}\r\n");
        match redis::parse_redis_value(resp.as_bytes()) {
            Ok(Value::ServerError(err)) => err,
            other => panic!("not a server error: {other:?}"),
        }
    }
}
