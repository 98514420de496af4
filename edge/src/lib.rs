//! The edge's protocol as pure functions, apart from the Workers runtime:
//! the worker calls them on requests, and native code (the demo shop, system
//! tests, fuzz targets) checks and forges the same values without workers-rs.
//!
//! * [`altcha`] — the entry guard's proof of work (ALTCHA's classic
//!   challenge): made and checked here, its single use kept by Redis.
//! * [`cookie`] — our cookie names (one prefix), reading and writing cookies.
//! * [`identity`] — signed visitor cookies and HS256 JWTs.
//! * [`signing`] — the signed headers the origin can verify.
//! * [`url`] — path and query of a request URL, without the `url` crate.
//! * [`place`] — the signed place cookie far-back polls are answered from.
//! * [`session`] — the signed session pass a browse route's pages pass on.
//! * [`mac`] — HMAC-SHA-256, keyed in one place for all of the above.
//! * [`visit`] — a protected request's matched path and intent (prefetch,
//!   cross-site).

pub mod altcha;
pub mod cookie;
pub mod identity;
pub mod jwks;
pub mod lang;
pub mod mac;
pub mod navigation;
pub mod place;
pub mod session;
pub mod signing;
pub mod url;
pub mod visit;

/// Header that carries the entry token (the [`cookie::TOKEN_COOKIE`] cookie
/// may carry it instead); never forwarded to the origin.
pub const TOKEN_HEADER: &str = "x-entry-token";

/// Header that carries a Turnstile token (the widget's form field
/// `cf-turnstile-response` also works).
pub const TURNSTILE_HEADER: &str = "x-turnstile-token";

/// Where Cloudflare puts the client's address: the entry guard's budget
/// and idle passthrough count by it.
pub const CLIENT_IP_HEADER: &str = "cf-connecting-ip";

/// JSON in `bytes` (a decoded token's header or claims, a solution), read
/// as text: every JSON the worker reads then goes through serde_json's one
/// `&str` reader, where `from_slice` would add a second copy of the
/// parser to the wasm. Bytes that are not UTF-8 are no JSON either way.
pub(crate) fn json_of<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Option<T> {
    serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_of_reads_json_bytes_and_refuses_what_is_not_utf8_json() {
        let v: Option<serde_json::Value> = json_of(br#"{"sub":"u\u00e9","n":1}"#);
        assert_eq!(v, Some(serde_json::json!({"sub": "ué", "n": 1})));
        // The same text with a byte that is no UTF-8 inside the string,
        // and text that is no JSON: both refused, as from_slice did.
        assert_eq!(json_of::<serde_json::Value>(b"{\"sub\":\"u\xff\"}"), None);
        assert_eq!(json_of::<serde_json::Value>(b"{\"sub\":"), None);
        // A token whose header decodes to Latin-1 text is malformed.
        use base64::Engine;
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let token = |head: &[u8]| format!("{}.{}.{}", b64(head), b64(b"{}"), b64(b"sig"));
        assert!(identity::parse_jwt(&token(br#"{"alg":"HS256"}"#)).is_ok());
        assert_eq!(
            identity::parse_jwt(&token(b"{\"alg\":\"HS256\",\"kid\":\"\xe9\"}")).err(),
            Some(identity::IdentityError::Malformed)
        );
    }
}
