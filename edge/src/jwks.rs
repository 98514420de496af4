//! A login service's published keys (a JWKS, RFC 7517), for the signed-in
//! mode's RS256 and ES256 tokens (Auth0, Clerk, Cognito, Supabase,
//! Firebase): which keys of a JWKS can verify which tokens, and how long a
//! fetched JWKS may be kept. The signature itself is checked by the
//! runtime's WebCrypto (worker/src/jwks.rs), so the wasm carries no RSA or
//! elliptic-curve code.

use queuegate_shared::json::Json;

/// The algorithms a JWKS key can verify here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// ECDSA on P-256 with SHA-256.
    Es256,
}

impl Alg {
    /// From a JWT header's `alg`: only these two; `none`, `HS256` (which
    /// would take a public key as an HMAC secret) and everything else are
    /// refused.
    pub fn from_header(alg: &str) -> Option<Alg> {
        match alg {
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            _ => None,
        }
    }

    /// The JOSE name.
    pub fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
        }
    }
}

/// One usable public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// Its `kid`, if any.
    pub kid: Option<String>,
    /// What it verifies (from its type and curve; its `alg` must agree).
    pub alg: Alg,
    /// The public JWK with only the members WebCrypto's `importKey` needs
    /// (`kty`, `n`, `e` or `kty`, `crv`, `x`, `y`), as JSON.
    pub public: String,
}

/// The most keys kept from one JWKS (services publish two or three).
pub const MAX_KEYS: usize = 20;
/// The largest JWKS read, in bytes.
pub const MAX_BYTES: usize = 64 * 1024;

/// Why a JWKS was not usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// Not a JSON object with a `keys` array.
    #[error("the JWKS is not a JSON key set")]
    NotASet,
    /// Larger than [`MAX_BYTES`].
    #[error("the JWKS is larger than 64 KiB")]
    TooLarge,
    /// No key in it can verify RS256 or ES256 signatures.
    #[error("the JWKS holds no RS256 or ES256 signing key")]
    NoKeys,
}

/// The signing keys of a JWKS that can verify RS256 or ES256: RSA keys
/// (`n`, `e`) and P-256 keys (`x`, `y`) whose `alg`, if given, matches,
/// whose `use`, if given, is `sig`, and whose `key_ops`, if given, allow
/// `verify`. Other keys (encryption keys, other curves, symmetric keys)
/// are skipped; at most [`MAX_KEYS`] are kept.
pub fn parse(text: &str) -> Result<Vec<Jwk>, JwksError> {
    if text.len() > MAX_BYTES {
        return Err(JwksError::TooLarge);
    }
    // Read as a generic value (code the worker carries anyway) rather than
    // a derived struct of ten optional members.
    let set = Json::parse(text).ok_or(JwksError::NotASet)?;
    let keys: Vec<Jwk> = set
        .get("keys")
        .and_then(|k| k.as_array())
        .ok_or(JwksError::NotASet)?
        .iter()
        .filter_map(usable)
        .take(MAX_KEYS)
        .collect();
    if keys.is_empty() {
        return Err(JwksError::NoKeys);
    }
    Ok(keys)
}

fn usable(k: &Json) -> Option<Jwk> {
    let text = |name: &str| k.get(name).and_then(|v| v.as_str());
    if text("use").is_some_and(|u| u != "sig")
        || k.get("key_ops").is_some_and(|ops| {
            !ops.as_array()
                .is_some_and(|ops| ops.iter().any(|o| o.as_str() == Some("verify")))
        })
    {
        return None;
    }
    let b64 = |name: &str| {
        text(name).filter(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
    };
    // The members are base64url (checked above): no escaping needed.
    let (alg, public) = match (text("kty"), text("crv")) {
        (Some("RSA"), _) => (
            Alg::Rs256,
            format!(r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#, b64("e")?, b64("n")?),
        ),
        (Some("EC"), Some("P-256")) => (
            Alg::Es256,
            format!(
                r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
                b64("x")?,
                b64("y")?
            ),
        ),
        _ => return None,
    };
    if text("alg").is_some_and(|a| a != alg.as_str()) {
        return None;
    }
    Some(Jwk {
        kid: text("kid").map(str::to_string),
        alg,
        public,
    })
}

/// The key for a token's `alg` and `kid`: the key with that `kid` (of that
/// algorithm: an RSA key never verifies an ES256 token); without a `kid`,
/// the only key of that algorithm, if there is exactly one.
pub fn select<'a>(keys: &'a [Jwk], alg: Alg, kid: Option<&str>) -> Option<&'a Jwk> {
    match kid {
        Some(kid) => keys
            .iter()
            .find(|k| k.kid.as_deref() == Some(kid))
            .filter(|k| k.alg == alg),
        None => {
            let mut of_alg = keys.iter().filter(|k| k.alg == alg);
            let one = of_alg.next()?;
            of_alg.next().is_none().then_some(one)
        }
    }
}

/// Whether fetching the set again could find the key a token names: its
/// `kid` is in no key held (a known `kid` of the wrong type never will be),
/// or, without a `kid`, no key of its algorithm is held.
pub fn worth_refetching(keys: &[Jwk], alg: Alg, kid: Option<&str>) -> bool {
    match kid {
        Some(kid) => !keys.iter().any(|k| k.kid.as_deref() == Some(kid)),
        None => !keys.iter().any(|k| k.alg == alg),
    }
}

/// How long a fetched JWKS is kept, from its `Cache-Control`: its
/// `max-age` (or `s-maxage`) clamped to 1 minute … 1 day; 10 minutes
/// without one; 1 minute for `no-store`/`no-cache` (the edge still keeps
/// it that long: fetching per request would let visitors make it call the
/// login service as fast as they like).
pub fn max_age_s(cache_control: Option<&str>) -> u64 {
    const MIN: u64 = 60;
    const MAX: u64 = 86_400;
    const DEFAULT: u64 = 600;
    let Some(cc) = cache_control else {
        return DEFAULT;
    };
    let mut age = None;
    for directive in cc.split(',').map(|d| d.trim().to_ascii_lowercase()) {
        if directive == "no-store" || directive == "no-cache" {
            return MIN;
        }
        let value = directive
            .strip_prefix("s-maxage=")
            .or_else(|| directive.strip_prefix("max-age="));
        if let Some(v) = value.and_then(|v| v.trim_matches('"').parse::<u64>().ok()) {
            // s-maxage wins over max-age for a shared cache like ours.
            if directive.starts_with("s-maxage=") || age.is_none() {
                age = Some(v);
            }
        }
    }
    age.map_or(DEFAULT, |a| a.clamp(MIN, MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SET: &str = r#"{"keys":[
        {"kty":"RSA","kid":"r1","use":"sig","alg":"RS256","n":"sXch","e":"AQAB"},
        {"kty":"EC","kid":"e1","crv":"P-256","x":"f83O","y":"x_FE","use":"sig"},
        {"kty":"RSA","kid":"enc","use":"enc","n":"AA","e":"AQAB"},
        {"kty":"EC","kid":"p384","crv":"P-384","x":"AA","y":"AA"},
        {"kty":"oct","kid":"hs","k":"c2VjcmV0"},
        {"kty":"RSA","kid":"mislabelled","alg":"ES256","n":"AA","e":"AQAB"},
        {"kty":"RSA","kid":"no-verify","key_ops":["encrypt"],"n":"AA","e":"AQAB"},
        {"kty":"RSA","kid":"odd","n":"a\"b","e":"AQAB"}
    ]}"#;

    #[test]
    fn only_signing_keys_of_our_two_algorithms_are_kept() {
        let keys = parse(SET).unwrap();
        let kids: Vec<_> = keys
            .iter()
            .map(|k| k.kid.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(kids, ["r1", "e1"]);
        assert_eq!(keys[0].public, r#"{"e":"AQAB","kty":"RSA","n":"sXch"}"#);
        assert_eq!(
            keys[1].public,
            r#"{"crv":"P-256","kty":"EC","x":"f83O","y":"x_FE"}"#
        );
        assert_eq!(parse("[]"), Err(JwksError::NotASet));
        assert_eq!(parse(r#"{"keys":[]}"#), Err(JwksError::NoKeys));
        assert_eq!(parse(&" ".repeat(MAX_BYTES + 1)), Err(JwksError::TooLarge));
    }

    #[test]
    fn a_key_is_chosen_by_kid_and_algorithm_never_across_them() {
        let keys = parse(SET).unwrap();
        assert_eq!(
            select(&keys, Alg::Rs256, Some("r1")).map(|k| k.alg),
            Some(Alg::Rs256)
        );
        assert!(
            select(&keys, Alg::Es256, Some("r1")).is_none(),
            "RSA key for an ES256 token"
        );
        assert!(select(&keys, Alg::Rs256, Some("nope")).is_none());
        assert_eq!(
            select(&keys, Alg::Es256, None).and_then(|k| k.kid.as_deref()),
            Some("e1")
        );
        let two = parse(
            r#"{"keys":[{"kty":"RSA","n":"AA","e":"AQAB"},{"kty":"RSA","n":"AB","e":"AQAB"}]}"#,
        )
        .unwrap();
        assert!(select(&two, Alg::Rs256, None).is_none(), "which one? none");
        assert!(
            !worth_refetching(&keys, Alg::Es256, Some("r1")),
            "known kid, wrong type"
        );
        assert!(worth_refetching(&keys, Alg::Rs256, Some("r2")));
        assert!(!worth_refetching(&keys, Alg::Rs256, None));
        for alg in ["none", "HS256", "RS512", "PS256", "ES384", "rs256"] {
            assert_eq!(Alg::from_header(alg), None, "{alg}");
        }
    }

    #[test]
    fn cache_headers_set_how_long_a_jwks_is_kept() {
        assert_eq!(max_age_s(None), 600);
        assert_eq!(max_age_s(Some("public, max-age=3600")), 3_600);
        assert_eq!(max_age_s(Some("max-age=5")), 60);
        assert_eq!(max_age_s(Some("max-age=99999999")), 86_400);
        assert_eq!(max_age_s(Some("public, max-age=100, s-maxage=900")), 900);
        assert_eq!(max_age_s(Some("s-maxage=900, max-age=100")), 900);
        assert_eq!(max_age_s(Some("no-store")), 60);
        assert_eq!(max_age_s(Some("public, must-revalidate")), 600);
        assert_eq!(max_age_s(Some("max-age=abc")), 600);
    }
}
