//! Who a request is from. A plain user id from the client is never trusted:
//! anonymous visitors carry an HMAC-signed cookie minted here, logged-in
//! users a JWT whose `sub` is the user id: HS256, verified here, or RS256 /
//! ES256 against the login service's published keys ([`crate::jwks`]),
//! whose signatures the worker checks with the runtime's WebCrypto.
//!
//! Written out rather than taken from a JWT crate: we accept exactly the
//! algorithms above, and the general crates pull RSA/EC code into the wasm
//! that the worker never needs. The cryptography itself is the `hmac`/
//! `sha2` crates' (or WebCrypto's); comparison is constant-time.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;
use queuegate_shared::json::Json;
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
    /// A JWT whose `kid` (or, without one, whose algorithm) names no key of
    /// the login service's published keys.
    #[error("the identity is signed with an unknown key")]
    UnknownKey,
    /// A JWT for another audience than `JWT_AUDIENCE`.
    #[error("the identity is for another audience")]
    Audience,
    /// A JWT from another issuer than `JWT_ISSUER`.
    #[error("the identity is from another issuer")]
    Issuer,
    /// A JWT this service does not take as a login: it names a critical
    /// extension (`crit`), none of which is understood here, or it is
    /// another type of token (`typ` other than a JWT or an access token:
    /// a logout token, a DPoP proof, a security event; `token_use` other
    /// than `id` or `access`).
    #[error("the identity is a kind of token this service does not accept")]
    Unsupported,
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

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_S: f64 = 30.0;

/// What a JWT's claims must say besides `exp`, `nbf` and `sub`: its
/// audience and issuer, when the operator configured them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Expect<'a> {
    /// `JWT_AUDIENCE`: `aud` must be it or contain it.
    pub audience: Option<&'a str>,
    /// `JWT_ISSUER`: `iss` must be it.
    pub issuer: Option<&'a str>,
}

/// A JWT split and decoded, its signature not checked yet: what a verifier
/// with a public key (the worker's WebCrypto) needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed<'a> {
    /// The header's `alg`.
    pub alg: String,
    /// The header's `kid`, if any.
    pub kid: Option<String>,
    /// `header.payload`, the bytes the signature covers.
    pub signing_input: &'a str,
    /// The decoded signature.
    pub signature: Vec<u8>,
    payload: Vec<u8>,
}

/// Splits and decodes a compact JWT (three base64url parts, a JSON header
/// with `alg`); checks nothing else.
pub fn parse_jwt(token: &str) -> Result<Parsed<'_>, IdentityError> {
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
    // Header and claims are read as generic values: derived structs would
    // each add their own deserializer to the wasm.
    let head: Json = crate::json_of(&decode(header)?).ok_or(IdentityError::Malformed)?;
    let alg = head
        .get("alg")
        .and_then(|a| a.as_str())
        .ok_or(IdentityError::Malformed)?;
    // A critical extension must be understood to be honoured (RFC 7515
    // §4.1.11); none is here.
    if head.get("crit").is_some() {
        return Err(IdentityError::Unsupported);
    }
    // A typed token must be a JWT or an access token (RFC 9068), not
    // another token signed by the same keys.
    if let Some(typ) = head.get("typ") {
        let t = typ.as_str().unwrap_or_default().to_ascii_lowercase();
        let t = t.strip_prefix("application/").unwrap_or(&t);
        if !matches!(t, "jwt" | "at+jwt") {
            return Err(IdentityError::Unsupported);
        }
    }
    Ok(Parsed {
        alg: alg.to_string(),
        kid: head.get("kid").and_then(|k| k.as_str()).map(str::to_string),
        signing_input: &token[..header.len() + 1 + payload.len()],
        signature: decode(sig)?,
        payload: decode(payload)?,
    })
}

/// A JWT whose signature and claims were verified.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedJwt {
    /// Its `sub`.
    pub user: UserId,
    /// Until when its claims hold (Unix seconds): its `exp` with the clock
    /// skew tolerated. A verifier that keeps the answer trusts it no later.
    pub valid_until_s: f64,
}

impl Parsed<'_> {
    /// The claims of a JWT whose signature was verified: `exp` required
    /// (with [`LEEWAY_S`] of clock skew), `nbf` honoured, `aud` and `iss`
    /// as `expect` asks, and `sub` a valid user id.
    pub fn claims(&self, now_s: f64, expect: &Expect<'_>) -> Result<UserId, IdentityError> {
        self.verified(now_s, expect).map(|v| v.user)
    }

    /// [`Parsed::claims`], with until when they hold.
    pub fn verified(&self, now_s: f64, expect: &Expect<'_>) -> Result<VerifiedJwt, IdentityError> {
        claims(&self.payload, now_s, expect)
    }
}

fn claims(payload: &[u8], now_s: f64, expect: &Expect<'_>) -> Result<VerifiedJwt, IdentityError> {
    let claims: Json = crate::json_of(payload).ok_or(IdentityError::Malformed)?;
    if !claims.is_object() {
        return Err(IdentityError::Malformed);
    }
    let number = |name: &str| claims.get(name).and_then(|v| v.as_f64());
    let text = |name: &str| claims.get(name).and_then(|v| v.as_str());
    let valid_until_s = match number("exp") {
        Some(exp) if exp + LEEWAY_S > now_s => exp + LEEWAY_S,
        _ => return Err(IdentityError::Expired),
    };
    if number("nbf").is_some_and(|nbf| nbf - LEEWAY_S > now_s) {
        return Err(IdentityError::NotYetValid);
    }
    // Cognito says which of its tokens this is: an id or access token is a
    // login, anything else is not.
    if let Some(used) = claims.get("token_use") {
        if !matches!(used.as_str(), Some("id" | "access")) {
            return Err(IdentityError::Unsupported);
        }
    }
    if let Some(want) = expect.audience {
        let ok = match claims.get("aud") {
            Some(Json::Text(a)) => a == want,
            Some(Json::Array(all)) => all.iter().any(|a| a.as_str() == Some(want)),
            _ => false,
        };
        if !ok {
            return Err(IdentityError::Audience);
        }
    }
    if let Some(want) = expect.issuer {
        if text("iss") != Some(want) {
            return Err(IdentityError::Issuer);
        }
    }
    let sub = text("sub").ok_or(IdentityError::Subject)?;
    let user = UserId::new(sub).map_err(|_| IdentityError::Subject)?;
    Ok(VerifiedJwt {
        user,
        valid_until_s,
    })
}

/// Verifies an HS256 JWT at `now_s` (Unix seconds) and returns its `sub`.
/// `exp` is required: a login token that never expires is refused.
pub fn verify_jwt(
    key: &(impl MacKey + ?Sized),
    token: &str,
    now_s: f64,
) -> Result<UserId, IdentityError> {
    verify_jwt_expecting(key, token, now_s, &Expect::default())
}

/// [`verify_jwt`] with the audience and issuer `expect` asks for.
pub fn verify_jwt_expecting(
    key: &(impl MacKey + ?Sized),
    token: &str,
    now_s: f64,
    expect: &Expect<'_>,
) -> Result<UserId, IdentityError> {
    verify_hs256(key, token, now_s, expect).map(|v| v.user)
}

/// [`verify_jwt_expecting`], with until when the claims hold.
pub fn verify_hs256(
    key: &(impl MacKey + ?Sized),
    token: &str,
    now_s: f64,
    expect: &Expect<'_>,
) -> Result<VerifiedJwt, IdentityError> {
    let parsed = parse_jwt(token)?;
    if parsed.alg != "HS256" {
        return Err(IdentityError::Algorithm);
    }
    let mut m = key.keyed();
    m.update(parsed.signing_input.as_bytes());
    m.verify_slice(&parsed.signature)
        .map_err(|_| IdentityError::BadSignature)?;
    parsed.verified(now_s, expect)
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

    #[test]
    fn audience_and_issuer_are_checked_when_configured() {
        let key = b"0123456789abcdef0123456789abcdef";
        let now = 1_800_000_000.0;
        let token = |extra: serde_json::Value| {
            let mut claims = json!({"sub": "u1", "exp": now + 60.0});
            for (k, v) in extra.as_object().into_iter().flatten() {
                claims[k] = v.clone();
            }
            sign_jwt(key, &claims)
        };
        let shop = Expect {
            audience: Some("shop-api"),
            issuer: Some("https://login.example/"),
        };
        let good = token(json!({"aud": "shop-api", "iss": "https://login.example/"}));
        assert_eq!(
            verify_jwt_expecting(key, &good, now, &shop).map(|u| u.to_string()),
            Ok("u1".into())
        );
        let listed = token(json!({"aud": ["other", "shop-api"], "iss": "https://login.example/"}));
        assert!(verify_jwt_expecting(key, &listed, now, &shop).is_ok());
        for (extra, why) in [
            (
                json!({"aud": "other", "iss": "https://login.example/"}),
                IdentityError::Audience,
            ),
            (
                json!({"iss": "https://login.example/"}),
                IdentityError::Audience,
            ),
            (
                json!({"aud": ["a", "b"], "iss": "https://login.example/"}),
                IdentityError::Audience,
            ),
            (
                json!({"aud": "shop-api", "iss": "https://evil.example/"}),
                IdentityError::Issuer,
            ),
            (json!({"aud": "shop-api"}), IdentityError::Issuer),
        ] {
            assert_eq!(
                verify_jwt_expecting(key, &token(extra.clone()), now, &shop),
                Err(why),
                "{extra}"
            );
        }
        // Unconfigured: neither is looked at.
        assert!(verify_jwt(key, &token(json!({"aud": "other"})), now).is_ok());
    }

    /// An HS256 JWT under `header` (the test's own, unlike [`sign_jwt`]).
    fn signed_with(header: &serde_json::Value, claims: &serde_json::Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(header.to_string());
        let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
        let mut m = KEY.keyed();
        m.update(format!("{header}.{payload}").as_bytes());
        let sig = URL_SAFE_NO_PAD.encode(m.finalize().into_bytes());
        format!("{header}.{payload}.{sig}")
    }

    #[test]
    fn critical_extensions_and_other_token_types_are_refused() {
        let now = 1_800_000_000.0;
        let claims = json!({"sub": "u1", "exp": now + 60.0});
        for header in [
            json!({"alg": "HS256"}),
            json!({"alg": "HS256", "typ": "JWT"}),
            json!({"alg": "HS256", "typ": "jwt"}),
            json!({"alg": "HS256", "typ": "at+jwt"}),
            json!({"alg": "HS256", "typ": "application/at+jwt"}),
        ] {
            assert!(
                verify_jwt(KEY, &signed_with(&header, &claims), now).is_ok(),
                "{header}"
            );
        }
        for header in [
            json!({"alg": "HS256", "crit": ["exp"]}),
            json!({"alg": "HS256", "crit": []}),
            json!({"alg": "HS256", "typ": "logout+jwt"}),
            json!({"alg": "HS256", "typ": "dpop+jwt"}),
            json!({"alg": "HS256", "typ": "secevent+jwt"}),
            json!({"alg": "HS256", "typ": 1}),
        ] {
            assert_eq!(
                verify_jwt(KEY, &signed_with(&header, &claims), now),
                Err(IdentityError::Unsupported),
                "{header}"
            );
        }
        let header = json!({"alg": "HS256", "typ": "JWT"});
        for (used, ok) in [("id", true), ("access", true), ("refresh", false)] {
            let c = json!({"sub": "u1", "exp": now + 60.0, "token_use": used});
            assert_eq!(
                verify_jwt(KEY, &signed_with(&header, &c), now).is_ok(),
                ok,
                "{used}"
            );
        }
    }

    #[test]
    fn a_verified_jwt_holds_until_its_exp_and_the_skew() {
        let now = 1_800_000_000.0;
        let token = sign_jwt(KEY, &json!({"sub": "u1", "exp": now + 60.0}));
        let v = verify_hs256(KEY, &token, now, &Expect::default()).unwrap();
        assert_eq!(v.user.as_str(), "u1");
        assert_eq!(v.valid_until_s, now + 60.0 + LEEWAY_S);
        let late = v.valid_until_s;
        assert_eq!(
            verify_hs256(KEY, &token, late, &Expect::default()),
            Err(IdentityError::Expired),
            "not a moment past it"
        );
    }

    #[test]
    fn a_parsed_token_names_its_algorithm_key_and_signed_bytes() {
        let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","kid":"k1","typ":"JWT"}"#);
        let p = URL_SAFE_NO_PAD.encode(br#"{"sub":"u1","exp":1}"#);
        let token = format!("{h}.{p}.AAEC");
        let parsed = parse_jwt(&token).unwrap();
        assert_eq!(
            (parsed.alg.as_str(), parsed.kid.as_deref()),
            ("ES256", Some("k1"))
        );
        assert_eq!(parsed.signing_input, format!("{h}.{p}"));
        assert_eq!(parsed.signature, vec![0, 1, 2]);
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            &format!("{h}.{p}.!!"),
            &format!("e30.{p}.AA"),
        ] {
            assert_eq!(
                parse_jwt(bad).err(),
                Some(IdentityError::Malformed),
                "{bad}"
            );
        }
    }
}
