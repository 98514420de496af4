//! The entry guard at the edge: reads what a new place brings (an ALTCHA
//! solution, a Turnstile token, the client address), checks what needs no
//! Redis, and hands the rest to the `enter` script. Also serves challenges.

use queuegate_edge::altcha::{self, Verified};
use queuegate_edge::{CLIENT_IP_HEADER, TURNSTILE_HEADER};
use queuegate_shared::guard::{ClientAddress, GuardCheck};
use queuegate_shared::QueueId;
use serde::Deserialize;

use crate::config::{GuardConfig, TurnstileConfig};
use crate::error::EdgeError;
use crate::http::Request;

/// Bodies longer than this are not searched for a solution.
const MAX_BODY: usize = 16 * 1024;

/// What an enter request brings for a new place.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Presented {
    /// The `altcha` solution, if any.
    pub altcha: Option<String>,
    /// The Turnstile token, if any.
    pub turnstile: Option<String>,
}

/// The body's fields: a string where present (`null` is no string).
#[derive(Deserialize)]
struct Fields {
    #[serde(default, deserialize_with = "present_string")]
    altcha: Option<String>,
    #[serde(
        rename = "cf-turnstile-response",
        default,
        deserialize_with = "present_string"
    )]
    turnstile: Option<String>,
}

fn present_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// The solution and token from headers, or from a JSON or form body. A
/// body that says it is JSON but is not the documented object is refused.
pub fn presented(
    altcha_header: Option<String>,
    turnstile_header: Option<String>,
    content_type: &str,
    body: &str,
) -> Result<Presented, EdgeError> {
    let from_body = if content_type.starts_with("application/json") {
        if body.trim().is_empty() {
            None
        } else {
            let refused = || {
                EdgeError::BadRequest(
                    "the body must be a JSON object with optional string fields \"altcha\" and \"cf-turnstile-response\"".into(),
                )
            };
            // An object, not the array form serde also accepts for a struct.
            if !body.trim_start().starts_with('{') {
                return Err(refused());
            }
            Some(serde_json::from_str::<Fields>(body).map_err(|_| refused())?)
        }
    } else if content_type.starts_with("application/x-www-form-urlencoded") {
        let mut f = Fields {
            altcha: None,
            turnstile: None,
        };
        for (k, v) in form_urlencoded::parse(body.as_bytes()) {
            match k.as_ref() {
                "altcha" => f.altcha = Some(v.into_owned()),
                "cf-turnstile-response" => f.turnstile = Some(v.into_owned()),
                _ => {}
            }
        }
        Some(f)
    } else {
        None
    };
    let (a, t) = from_body.map_or((None, None), |f| (f.altcha, f.turnstile));
    let some = |v: Option<String>| v.filter(|s| !s.is_empty());
    let (altcha_header, a) = (some(altcha_header), some(a));
    let (turnstile_header, t) = (some(turnstile_header), some(t));
    // Shapes as documented: anything else is a bad request, whether or
    // not the value would have been used (a header wins over the body,
    // but a malformed body beside it is refused all the same).
    let base64 = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=');
    for v in [&altcha_header, &a].into_iter().flatten() {
        if v.len() > 4096 || !v.chars().all(base64) {
            return Err(EdgeError::BadRequest(
                "the solution must be base64, at most 4096 bytes".into(),
            ));
        }
    }
    for v in [&turnstile_header, &t].into_iter().flatten() {
        if v.len() > 2048 || !v.chars().all(|c| c.is_ascii_graphic()) {
            return Err(EdgeError::BadRequest(
                "the Turnstile token must be printable ASCII, at most 2048 bytes".into(),
            ));
        }
    }
    Ok(Presented {
        altcha: altcha_header.or(a),
        turnstile: turnstile_header.or(t),
    })
}

/// Reads what an enter request presents, headers first, then a (small)
/// body, which must be well formed when present.
pub async fn read(req: &Request) -> Result<Presented, EdgeError> {
    let header = |name: &str| req.headers().get(name).ok().flatten();
    let (a, t) = (header(altcha::HEADER), header(TURNSTILE_HEADER));
    let content_type = header("content-type")
        .unwrap_or_default()
        .to_ascii_lowercase();
    let length: usize = header("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let body = if length > 0 && length <= MAX_BODY {
        req.text().await?
    } else {
        String::new()
    };
    presented(a, t, &content_type, &body)
}

/// The budget's address: `CF-Connecting-IP`, grouped; without it (a local
/// `wrangler dev`, a misrouted request) all such requests share one budget.
pub fn address(req: &Request) -> ClientAddress {
    req.headers()
        .get(CLIENT_IP_HEADER)
        .ok()
        .flatten()
        .and_then(|v| ClientAddress::parse(&v))
        .unwrap_or_else(ClientAddress::unknown)
}

/// Checks a presented solution (no Redis). None when none was sent.
pub fn verify_solution(
    config: &GuardConfig,
    queue: &QueueId,
    presented: Option<&str>,
) -> Result<Option<Verified>, EdgeError> {
    let Some(payload) = presented else {
        return Ok(None);
    };
    let now = crate::clock::now_ms();
    altcha::verify(&config.challenge_secret, payload, queue, now)
        .map(Some)
        .map_err(EdgeError::ChallengeInvalid)
}

/// The check a new place lacks, if any: what the script refuses for.
pub fn missing(
    config: &GuardConfig,
    solution: Option<&Verified>,
    turnstile_passed: bool,
) -> Option<GuardCheck> {
    if config.challenge && solution.is_none() {
        Some(GuardCheck::Challenge)
    } else if config.turnstile.is_some() && !turnstile_passed {
        Some(GuardCheck::Turnstile)
    } else {
        None
    }
}

/// Turnstile's `siteverify` reply (the documented fields we use).
#[derive(Debug, Deserialize, PartialEq, Eq)]
pub struct Siteverify {
    /// Whether the token is valid.
    pub success: bool,
    /// Why not.
    #[serde(rename = "error-codes", default)]
    pub error_codes: Vec<String>,
    /// The site the token was issued on.
    #[serde(default)]
    pub hostname: Option<String>,
    /// The widget's action.
    #[serde(default)]
    pub action: Option<String>,
}

/// The form `siteverify` takes; `remoteip` only when the visitor's address
/// is known.
pub fn siteverify_form(
    t: &TurnstileConfig,
    token: &str,
    remote_ip: Option<&str>,
    key: &str,
) -> String {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("secret", &t.secret)
        .append_pair("response", token);
    if let Some(ip) = remote_ip {
        form.append_pair("remoteip", ip);
    }
    form.append_pair("idempotency_key", key).finish()
}

/// The visitor's own address for `siteverify`'s `remoteip`: the whole
/// `CF-Connecting-IP` when it is an address (the budget groups IPv6 by /64;
/// Turnstile wants the address itself), else none.
pub fn remote_ip(req: &Request) -> Option<String> {
    let v = req.headers().get(CLIENT_IP_HEADER).ok().flatten()?;
    let ip: std::net::IpAddr = v.trim().parse().ok()?;
    Some(ip.to_string())
}

/// Whether a passed token was issued on this site: `siteverify`'s
/// `hostname` against the host the visitor asked (no port; ASCII case
/// ignored). A token solved on another site is refused.
pub fn same_site(reply: &Siteverify, host: &str) -> bool {
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => match host.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        },
    };
    reply
        .hostname
        .as_deref()
        .is_some_and(|h| h.eq_ignore_ascii_case(host))
}

/// The most of siteverify's reply read (it is a few hundred bytes).
const SITEVERIFY_MAX_BYTES: usize = 16 * 1024;

/// Asks `siteverify` about a token. Ok when it passed, or when siteverify
/// could not be asked (no answer in time, a network error, a reply that is
/// not one) and the config fails open; a refusal, or no answer while
/// failing closed, is an error.
///
/// The deadline is an `AbortSignal.timeout`, as for the origin (the REST
/// client clears its own timer): at the deadline the runtime aborts the
/// subrequest itself, where a Rust timer would only stop waiting and leave
/// it running.
pub async fn turnstile(
    t: &TurnstileConfig,
    token: &str,
    remote_ip: Option<&str>,
    host: &str,
) -> Result<(), EdgeError> {
    let form = siteverify_form(t, token, remote_ip, &uuid_like(crate::random::bytes()?));
    let timeout_ms = u32::try_from(t.timeout_ms).unwrap_or(u32::MAX);
    let outcome = async {
        let reply = crate::subrequest::text(
            "POST",
            &t.verify_url,
            "application/x-www-form-urlencoded",
            &form,
            timeout_ms,
            SITEVERIFY_MAX_BYTES,
        )
        .await?;
        if reply.status != 200 {
            return Err(format!("siteverify answered {}", reply.status));
        }
        if reply.too_large {
            return Err("siteverify's reply is too large".into());
        }
        serde_json::from_str::<Siteverify>(&reply.text)
            .map_err(|e| format!("siteverify reply: {e}"))
    }
    .await;
    match outcome {
        Ok(v) if v.success && same_site(&v, host) => Ok(()),
        Ok(v) if v.success => {
            // A token solved on another site: worth a line for the
            // operator (hostnames only, never the token).
            worker::console_warn!(
                "turnstile: a token solved on {:?} was sent to {host:?}; refused",
                v.hostname.as_deref().unwrap_or("")
            );
            Err(EdgeError::TurnstileFailed("hostname-mismatch".into()))
        }
        Ok(v) => Err(EdgeError::TurnstileFailed(v.error_codes.join(","))),
        Err(why) if t.fail_open => {
            worker::console_warn!("turnstile unavailable, failing open: {why}");
            Ok(())
        }
        Err(why) => Err(EdgeError::TurnstileUnavailable(why)),
    }
}

/// An idempotency key in the UUID shape siteverify documents.
fn uuid_like(b: [u8; 16]) -> String {
    let h = hex::encode(b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solutions_come_from_a_header_a_json_or_a_form_body() {
        let h = presented(Some("AAA".into()), None, "", "").unwrap();
        assert_eq!(h.altcha.as_deref(), Some("AAA"));
        let j = presented(
            None,
            None,
            "application/json",
            r#"{"altcha":"BBB","cf-turnstile-response":"T"}"#,
        )
        .unwrap();
        assert_eq!(
            (j.altcha.as_deref(), j.turnstile.as_deref()),
            (Some("BBB"), Some("T"))
        );
        let form = "application/x-www-form-urlencoded";
        let f = presented(None, None, form, "altcha=a%2Bb%3D&x=1").unwrap();
        assert_eq!(f.altcha.as_deref(), Some("a+b="));
        let none = presented(Some(String::new()), None, "text/plain", "altcha=x").unwrap();
        assert_eq!(none, Presented::default());
        assert!(presented(Some(" ".into()), None, "", "").is_err());
        for bad in [
            "D\u{10}o/",
            "[]",
            r#"{"altcha":5}"#,
            r#"{"cf-turnstile-response":null}"#,
            // The array form serde accepts for a struct, and a field given
            // twice: neither is the documented object.
            r#"["BBB","T"]"#,
            r#" ["BBB"]"#,
            r#"{"altcha":"A","altcha":"B"}"#,
        ] {
            let e = presented(None, None, "application/json", bad).unwrap_err();
            assert_eq!((e.status(), e.code()), (400, "bad_request"), "{bad}");
        }
        assert!(presented(None, None, "application/json", "  ").is_ok());
        let long = "A".repeat(2049);
        assert!(presented(None, Some(long), "", "").is_err());
        // A header wins over the body, but a malformed body beside a good
        // header is refused all the same (Schemathesis found it).
        let form = "application/x-www-form-urlencoded";
        for (a, t, body) in [
            (
                None,
                Some("ok-token"),
                "cf-turnstile-response=%F0%98%B3%8F%0F",
            ),
            (Some("AAA"), None, "altcha=not%20base64"),
        ] {
            let e = presented(a.map(str::to_string), t.map(str::to_string), form, body);
            assert!(matches!(e, Err(EdgeError::BadRequest(_))), "{body}: {e:?}");
        }
        assert!(presented(Some("not base64!".into()), None, "", "").is_err());
    }

    #[test]
    fn siteverify_gets_the_documented_form() {
        let t = TurnstileConfig {
            secret: "s3cret".into(),
            site_key: "site".into(),
            verify_url: "http://127.0.0.1:1/".into(),
            script_url: "http://127.0.0.1:1/api.js".into(),
            timeout_ms: 1000,
            fail_open: false,
        };
        let form = siteverify_form(&t, "tok en", Some("203.0.113.7"), "k");
        assert_eq!(
            form,
            "secret=s3cret&response=tok+en&remoteip=203.0.113.7&idempotency_key=k"
        );
        let form = siteverify_form(&t, "t", None, "k");
        assert_eq!(form, "secret=s3cret&response=t&idempotency_key=k");
        assert_eq!(t.script_origin(), "http://127.0.0.1:1");
        let reply: Siteverify = serde_json::from_str(
            r#"{"success":false,"error-codes":["timeout-or-duplicate"],"challenge_ts":"x"}"#,
        )
        .unwrap();
        assert_eq!(reply.error_codes, ["timeout-or-duplicate"]);
        assert_eq!(uuid_like([0xab; 16]).len(), 36);
    }

    #[test]
    fn a_token_counts_only_for_the_site_it_was_solved_on() {
        let said = |h: Option<&str>| Siteverify {
            success: true,
            error_codes: vec![],
            hostname: h.map(String::from),
            action: None,
        };
        assert!(same_site(&said(Some("shop.example")), "shop.example"));
        assert!(same_site(&said(Some("shop.example")), "SHOP.example:443"));
        assert!(same_site(&said(Some("127.0.0.1")), "127.0.0.1:8787"));
        assert!(same_site(&said(Some("::1")), "[::1]:8787"));
        assert!(!same_site(&said(Some("evil.example")), "shop.example"));
        assert!(!same_site(&said(Some("shop.example.evil")), "shop.example"));
        assert!(!same_site(&said(None), "shop.example"));
    }
}
