//! A Redis command as the REST forms carry it: JSON arrays of strings and
//! numbers, or URL path segments plus an optional raw body.

use serde_json::Value as Json;

use crate::error::GatewayError;

/// One Redis command: its name and arguments as raw bytes (binary-safe).
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    args: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Arguments are user values: only the name and the count are shown.
        write!(f, "Command({}, {} args)", self.name(), self.args.len() - 1)
    }
}

impl Command {
    /// A command from its words; the first is the name.
    pub fn new(args: Vec<Vec<u8>>) -> Result<Command, GatewayError> {
        match args.first() {
            Some(name) if !name.is_empty() => Ok(Command { args }),
            _ => Err(GatewayError::BadRequest("empty command".into())),
        }
    }

    /// A command from a JSON array such as `["SET","k","v"]`.
    pub fn from_json(value: Json) -> Result<Command, GatewayError> {
        let Json::Array(items) = value else {
            return Err(GatewayError::BadRequest(
                "a command must be a JSON array like [\"GET\",\"key\"]".into(),
            ));
        };
        let args = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| json_arg(i, item))
            .collect::<Result<Vec<_>, _>>()?;
        Command::new(args)
    }

    /// The command name in upper case (for policy checks and logs).
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.args[0]).to_ascii_uppercase()
    }

    /// Arguments after the name.
    pub fn args(&self) -> &[Vec<u8>] {
        &self.args[1..]
    }

    /// The command packed for redis-rs.
    pub fn to_cmd(&self) -> redis::Cmd {
        let mut cmd = redis::Cmd::new();
        for arg in &self.args {
            cmd.arg(arg.as_slice());
        }
        cmd
    }
}

/// One JSON argument as Redis bytes: a string as its UTF-8, a number as its
/// decimal text, a boolean as `true`/`false` (what @upstash/redis sends for
/// `set(k, true)`). Anything else is refused rather than guessed.
fn json_arg(index: usize, item: Json) -> Result<Vec<u8>, GatewayError> {
    match item {
        Json::String(s) => Ok(s.into_bytes()),
        Json::Number(n) => Ok(n.to_string().into_bytes()),
        Json::Bool(b) => Ok(b.to_string().into_bytes()),
        Json::Null | Json::Array(_) | Json::Object(_) => Err(GatewayError::BadRequest(format!(
            "argument {index} must be a string or a number"
        ))),
    }
}

fn parse_json(body: &[u8]) -> Result<Json, GatewayError> {
    serde_json::from_slice(body)
        .map_err(|e| GatewayError::BadRequest(format!("the body is not valid JSON: {e}")))
}

/// The body of `POST /`: one command as a JSON array.
pub fn parse_command(body: &[u8]) -> Result<Command, GatewayError> {
    Command::from_json(parse_json(body)?)
}

/// The body of `/pipeline` and `/multi-exec`: a non-empty JSON array of
/// command arrays.
pub fn parse_batch(body: &[u8]) -> Result<Vec<Command>, GatewayError> {
    let Json::Array(items) = parse_json(body)? else {
        return Err(GatewayError::BadRequest(
            "the body must be a JSON array of commands like [[\"GET\",\"k\"]]".into(),
        ));
    };
    if items.is_empty() {
        return Err(GatewayError::BadRequest(
            "the batch holds no command".into(),
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            Command::from_json(item).map_err(|e| match e {
                GatewayError::BadRequest(why) => {
                    GatewayError::BadRequest(format!("command {i}: {why}"))
                }
                other => other,
            })
        })
        .collect()
}

/// The name of the query parameter that carries the token, never an argument.
pub const TOKEN_PARAM: &[u8] = b"_token";

/// The path form `/CMD/arg/...`: segments percent-decoded (so `%2F` is a
/// slash inside one argument), then the raw body if it is not empty, then
/// query parameters other than `_token` as `name value` words (Upstash:
/// `POST /set/k?EX=100` with the value as body is `SET k <body> EX 100`).
pub fn parse_path(path: &str, query: Option<&str>, body: &[u8]) -> Result<Command, GatewayError> {
    let mut args: Vec<Vec<u8>> = path
        .strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|segment| percent_encoding::percent_decode_str(segment).collect())
        .collect();
    if !body.is_empty() {
        args.push(body.to_vec());
    }
    for (name, value) in query_pairs(query.unwrap_or_default()) {
        if name == TOKEN_PARAM {
            continue;
        }
        args.push(name);
        args.extend(value);
    }
    Command::new(args)
}

/// `k=v` pairs of a query string, decoded the way Go's `url.ParseQuery`
/// does (`+` is a space), as Upstash's server does.
pub fn query_pairs(query: &str) -> impl Iterator<Item = (Vec<u8>, Option<Vec<u8>>)> + '_ {
    let decode = |s: &str| -> Vec<u8> {
        let spaced = s.replace('+', " ");
        percent_encoding::percent_decode_str(&spaced).collect()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(move |pair| match pair.split_once('=') {
            Some((k, v)) => (decode(k), Some(decode(v))),
            None => (decode(pair), None),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_numbers_and_booleans_become_bytes() {
        let c = parse_command(br#"["zadd","z",1.5,"m",-7,true,"\u00e9"]"#).unwrap();
        assert_eq!(c.name(), "ZADD");
        let args: Vec<&[u8]> = c.args().iter().map(Vec::as_slice).collect();
        assert_eq!(
            args,
            [&b"z"[..], b"1.5", b"m", b"-7", b"true", "\u{e9}".as_bytes()]
        );
    }

    #[test]
    fn bad_shapes_are_bad_requests() {
        for body in [
            &b"not json"[..],
            b"{}",
            b"[]",
            b"[null]",
            b"[\"get\",{}]",
            b"[\"\"]",
        ] {
            let err = parse_command(body).unwrap_err();
            assert!(matches!(err, GatewayError::BadRequest(_)), "{body:?}");
        }
        assert!(parse_batch(b"[]").is_err());
        assert!(parse_batch(b"[\"get\"]").is_err());
        assert_eq!(parse_batch(br#"[["ping"],["get","k"]]"#).unwrap().len(), 2);
    }

    #[test]
    fn path_form_decodes_segments_then_body_then_query() {
        let c = parse_path("/set/a%2Fb/x%20y", Some("_token=t&EX=100&NX"), b"").unwrap();
        let words: Vec<&[u8]> = c.args.iter().map(Vec::as_slice).collect();
        assert_eq!(words, [&b"set"[..], b"a/b", b"x y", b"EX", b"100", b"NX"]);
        let c = parse_path("/set/k", Some("EX=5"), b"\xff\x00").unwrap();
        let words: Vec<&[u8]> = c.args.iter().map(Vec::as_slice).collect();
        assert_eq!(words, [&b"set"[..], b"k", b"\xff\x00", b"EX", b"5"]);
        assert!(parse_path("/", None, b"").is_err());
        assert!(parse_path("//get", None, b"").is_err());
    }

    #[test]
    fn debug_hides_values() {
        let c = parse_command(br#"["set","k","secret"]"#).unwrap();
        assert!(!format!("{c:?}").contains("secret"));
    }
}
