//! The token check: `Authorization: Bearer <token>` or `?_token=<token>`,
//! compared in constant time so response timing does not reveal how much
//! of a guess was right.

use axum::http::{header, HeaderMap, Uri};
use subtle::ConstantTimeEq;

use crate::error::GatewayError;
use crate::protocol::{query_pairs, TOKEN_PARAM};

/// The expected token. `Debug` never shows it.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// Wraps the configured secret.
    pub fn new(secret: &str) -> Token {
        Token(secret.as_bytes().to_vec())
    }

    /// True when `presented` equals the token. Runs over the expected
    /// length whatever is presented, so neither content nor the length of
    /// a guess shows in the timing.
    pub fn matches(&self, presented: &[u8]) -> bool {
        let same_len = (self.0.len() as u64).ct_eq(&(presented.len() as u64));
        let same_bytes = self
            .0
            .iter()
            .enumerate()
            .fold(subtle::Choice::from(1), |acc, (i, b)| {
                acc & b.ct_eq(presented.get(i).unwrap_or(&0))
            });
        (same_len & same_bytes).into()
    }

    /// Accepts the request or says 401. The header wins when both are
    /// present, as with Upstash.
    pub fn check(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), GatewayError> {
        let presented = bearer(headers).or_else(|| query_token(uri));
        match presented {
            Some(t) if self.matches(&t) => Ok(()),
            _ => Err(GatewayError::Unauthorized),
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<Vec<u8>> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii().to_vec())
}

/// `_token` from the query string, percent-decoded.
fn query_token(uri: &Uri) -> Option<Vec<u8>> {
    query_pairs(uri.query()?)
        .find(|(k, _)| k == TOKEN_PARAM)
        .and_then(|(_, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_only_the_exact_token() {
        let t = Token::new("s3cret");
        assert!(t.matches(b"s3cret"));
        for wrong in [&b""[..], b"s3cre", b"s3cret!", b"S3cret", b"s3cret\0"] {
            assert!(!t.matches(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn header_and_query_forms() {
        let t = Token::new("a b");
        let mut headers = HeaderMap::new();
        let uri: Uri = "/get/k?_token=a+b".parse().unwrap();
        assert!(t.check(&headers, &uri).is_ok());
        let uri: Uri = "/get/k?_token=a%20b".parse().unwrap();
        assert!(t.check(&headers, &uri).is_ok());
        let plain: Uri = "/get/k".parse().unwrap();
        assert!(t.check(&headers, &plain).is_err());
        headers.insert(header::AUTHORIZATION, "bearer a b".parse().unwrap());
        assert!(t.check(&headers, &plain).is_ok());
        headers.insert(header::AUTHORIZATION, "Basic a b".parse().unwrap());
        assert!(t.check(&headers, &plain).is_err());
        assert!(!format!("{t:?}").contains("a b"));
    }
}
