//! Who a request is from. A plain user id from the client is never trusted:
//! anonymous visitors carry an HMAC-signed cookie minted here, logged-in
//! users an HS256 JWT whose `sub` is the user id.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;
use queuegate_shared::UserId;

use crate::mac::{self, HmacSha256};

/// Domain separation for visitor-cookie MACs.
const VISITOR_CONTEXT: &[u8] = b"queuegate-visitor-v1:";

/// Why an identity was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// Not of the expected shape.
    #[error("the identity is malformed")]
    Malformed,
    /// The MAC does not match (forged or tampered).
    #[error("the identity signature is invalid")]
    BadSignature,
    /// A JWT past its `exp` (or without one).
    #[error("the identity has expired")]
    Expired,
    /// A JWT before its `nbf`.
    #[error("the identity is not valid yet")]
    NotYetValid,
    /// A JWT with a header other than HS256.
    #[error("the identity uses an unsupported algorithm")]
    Algorithm,
    /// A `sub` that is not a valid user id.
    #[error("the identity's subject is not a valid user id")]
    Subject,
}

/// An identity secret, keyed once. HMAC-SHA-256 first hashes the padded key
/// (two SHA-256 blocks); a `Key` keeps that state, so each cookie or JWT it
/// checks costs two compressions instead of four. The worker builds one per
/// isolate.
#[derive(Clone)]
pub struct Key {
    secret: Vec<u8>,
    keyed: HmacSha256,
}

impl Key {
    /// Keys `secret`.
    pub fn new(secret: &[u8]) -> Key {
        Key {
            secret: secret.to_vec(),
            keyed: mac::keyed(secret),
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.secret == other.secret
    }
}

impl Eq for Key {}

impl std::fmt::Debug for Key {
    // The secret never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// What the functions below sign with: a [`Key`], or the secret's bytes
/// (keyed on each call: tests, tools, fuzzing).
pub trait MacKey {
    /// A MAC in its keyed state.
    fn keyed(&self) -> HmacSha256;
}

impl MacKey for Key {
    fn keyed(&self) -> HmacSha256 {
        self.keyed.clone()
    }
}

impl MacKey for [u8] {
    fn keyed(&self) -> HmacSha256 {
        mac::keyed(self)
    }
}

impl<const N: usize> MacKey for [u8; N] {
    fn keyed(&self) -> HmacSha256 {
        mac::keyed(self)
    }
}

/// A new visitor: id from 16 random bytes, and the signed cookie value.
pub fn mint_visitor(key: &(impl MacKey + ?Sized), random: [u8; 16]) -> (UserId, String) {
    let id = URL_SAFE_NO_PAD.encode(random);
    let mut m = key.keyed();
    m.update(VISITOR_CONTEXT);
    m.update(id.as_bytes());
    let sig = URL_SAFE_NO_PAD.encode(m.finalize().into_bytes());
    // base64url of 16 bytes is 22 characters of [A-Za-z0-9_-]: a valid id.
    #[allow(clippy::expect_used)]
    let user = UserId::new(&id).expect("base64url ids are valid user ids");
    (user, format!("{id}.{sig}"))
}

/// Checks a visitor cookie value and returns its user id.
pub fn verify_visitor(key: &(impl MacKey + ?Sized), value: &str) -> Result<UserId, IdentityError> {
    let (id, sig) = value.split_once('.').ok_or(IdentityError::Malformed)?;
    if id.len() != 22 {
        return Err(IdentityError::Malformed);
    }
    let sig = URL_SAFE_NO_PAD
        .decode(sig)
        .map_err(|_| IdentityError::Malformed)?;
    let mut m = key.keyed();
    m.update(VISITOR_CONTEXT);
    m.update(id.as_bytes());
    m.verify_slice(&sig)
        .map_err(|_| IdentityError::BadSignature)?;
    UserId::new(id).map_err(|_| IdentityError::Malformed)
}

#[derive(serde::Deserialize)]
struct JwtHeader {
    alg: String,
}

#[derive(serde::Deserialize)]
struct JwtClaims {
    sub: Option<String>,
    exp: Option<f64>,
    nbf: Option<f64>,
}

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_S: f64 = 30.0;

// Written out rather than taken from a JWT crate: we accept exactly one
// algorithm (HS256), and the general crates pull RSA/EC code into the wasm
// that the worker never uses. The cryptography itself is the `hmac`/`sha2`
// crates'; comparison is constant-time.

/// Verifies an HS256 JWT at `now_s` (Unix seconds) and returns its `sub`.
/// `exp` is required: a login token that never expires is refused.
pub fn verify_jwt(
    key: &(impl MacKey + ?Sized),
    token: &str,
    now_s: f64,
) -> Result<UserId, IdentityError> {
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(IdentityError::Malformed);
    };
    let decode = |part: &str| {
        URL_SAFE_NO_PAD
            .decode(part)
            .map_err(|_| IdentityError::Malformed)
    };
    let head: JwtHeader =
        serde_json::from_slice(&decode(header)?).map_err(|_| IdentityError::Malformed)?;
    if head.alg != "HS256" {
        return Err(IdentityError::Algorithm);
    }
    let mut m = key.keyed();
    m.update(header.as_bytes());
    m.update(b".");
    m.update(payload.as_bytes());
    m.verify_slice(&decode(sig)?)
        .map_err(|_| IdentityError::BadSignature)?;
    let claims: JwtClaims =
        serde_json::from_slice(&decode(payload)?).map_err(|_| IdentityError::Malformed)?;
    match claims.exp {
        Some(exp) if exp + LEEWAY_S > now_s => {}
        _ => return Err(IdentityError::Expired),
    }
    if claims.nbf.is_some_and(|nbf| nbf - LEEWAY_S > now_s) {
        return Err(IdentityError::NotYetValid);
    }
    let sub = claims.sub.ok_or(IdentityError::Subject)?;
    UserId::new(&sub).map_err(|_| IdentityError::Subject)
}

/// Signs an HS256 JWT (for tests and the local demo's login stand-in).
pub fn sign_jwt(key: &(impl MacKey + ?Sized), claims: &serde_json::Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let mut m = key.keyed();
    m.update(header.as_bytes());
    m.update(b".");
    m.update(payload.as_bytes());
    let sig = URL_SAFE_NO_PAD.encode(m.finalize().into_bytes());
    format!("{header}.{payload}.{sig}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    #[test]
    fn visitor_cookies_verify_and_forgeries_fail() {
        let (user, value) = mint_visitor(KEY, [9; 16]);
        assert_eq!(verify_visitor(KEY, &value), Ok(user.clone()));
        assert_eq!(user.as_str().len(), 22);
        // Another id with the same signature, another key, garbage.
        let (other, _) = mint_visitor(KEY, [8; 16]);
        let sig = value.split_once('.').unwrap().1;
        let forged = format!("{}.{sig}", other.as_str());
        assert_eq!(
            verify_visitor(KEY, &forged),
            Err(IdentityError::BadSignature)
        );
        assert_eq!(
            verify_visitor(b"another-key-another-key-another-k", &value),
            Err(IdentityError::BadSignature)
        );
        for bad in ["", "abc", "abc.def", &format!("{}.!!", user.as_str())] {
            assert!(verify_visitor(KEY, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_key_signs_as_its_secret_does() {
        let key = Key::new(KEY);
        let (user, value) = mint_visitor(&key, [5; 16]);
        assert_eq!(mint_visitor(KEY, [5; 16]), (user.clone(), value.clone()));
        assert_eq!(verify_visitor(KEY, &value), Ok(user.clone()));
        assert_eq!(verify_visitor(&key, &value), Ok(user));
        let other = Key::new(b"another-key-another-key-another-k");
        assert_eq!(
            verify_visitor(&other, &value),
            Err(IdentityError::BadSignature)
        );
        let claims = json!({"sub": "u1", "exp": 2_000_000_000.0});
        assert_eq!(sign_jwt(&key, &claims), sign_jwt(KEY, &claims));
        assert_eq!(key, Key::new(KEY));
        assert_ne!(key, other);
        assert_eq!(format!("{key:?}"), "Key(..)");
    }

    #[test]
    fn jwts_verify_and_every_tampering_fails() {
        let now = 1_764_669_600.0;
        let good = sign_jwt(KEY, &json!({"sub": "auth0|42", "exp": now + 60.0}));
        assert_eq!(verify_jwt(KEY, &good, now).unwrap().as_str(), "auth0|42");

        let expired = sign_jwt(KEY, &json!({"sub": "a", "exp": now - 100.0}));
        assert_eq!(verify_jwt(KEY, &expired, now), Err(IdentityError::Expired));
        let no_exp = sign_jwt(KEY, &json!({"sub": "a"}));
        assert_eq!(verify_jwt(KEY, &no_exp, now), Err(IdentityError::Expired));
        let early = sign_jwt(
            KEY,
            &json!({"sub": "a", "exp": now + 600.0, "nbf": now + 300.0}),
        );
        assert_eq!(
            verify_jwt(KEY, &early, now),
            Err(IdentityError::NotYetValid)
        );
        let bad_sub = sign_jwt(KEY, &json!({"sub": "a b", "exp": now + 60.0}));
        assert_eq!(verify_jwt(KEY, &bad_sub, now), Err(IdentityError::Subject));

        // A payload swapped under the old signature.
        let mut parts: Vec<String> = good.split('.').map(String::from).collect();
        parts[1] = URL_SAFE_NO_PAD.encode(json!({"sub": "admin", "exp": now + 60.0}).to_string());
        assert_eq!(
            verify_jwt(KEY, &parts.join("."), now),
            Err(IdentityError::BadSignature)
        );
        // alg=none and other algorithms are refused before any MAC check.
        let none_header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#);
        let forged = format!("{none_header}.{}.", good.split('.').nth(1).unwrap());
        assert_eq!(verify_jwt(KEY, &forged, now), Err(IdentityError::Algorithm));
        assert_eq!(
            verify_jwt(b"wrong-key-wrong-key-wrong-key-wr", &good, now),
            Err(IdentityError::BadSignature)
        );
        assert_eq!(verify_jwt(KEY, "a.b", now), Err(IdentityError::Malformed));
    }
}
