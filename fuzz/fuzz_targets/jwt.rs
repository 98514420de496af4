//! `identity::verify_jwt`: never panics on any token; a token signed with
//! the key verifies exactly when the contract says (HS256, `exp` required,
//! 30 s leeway on `exp` and `nbf`, `sub` a valid user id) and then yields
//! `sub`; no single-edit tampering of a signed token verifies.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use queuegate_shared::UserId;
use queuegate_edge::identity::{sign_jwt, verify_jwt, IdentityError};

const KEY: &[u8] = b"fuzz-jwt-secret-0123456789abcdefghijkl";
const LEEWAY_S: f64 = 30.0;

#[derive(Debug, Arbitrary)]
struct Input {
    sub: Option<String>,
    exp: Option<f64>,
    nbf: Option<f64>,
    /// Seconds from the clock's base, kept in a realistic range.
    now_offset: i32,
    at: usize,
    byte: u8,
    raw: String,
}

fuzz_target!(|input: Input| {
    let now = 1_764_669_600.0 + f64::from(input.now_offset);
    // Arbitrary text: no panic.
    let _ = verify_jwt(KEY, &input.raw, now);

    // JSON has no NaN or infinities: they serialise as null, i.e. absent.
    let finite = |v: Option<f64>| v.filter(|x| x.is_finite());
    let (exp, nbf) = (finite(input.exp), finite(input.nbf));
    let mut claims = serde_json::Map::new();
    if let Some(s) = &input.sub {
        claims.insert("sub".into(), s.clone().into());
    }
    if let Some(e) = exp {
        claims.insert("exp".into(), e.into());
    }
    if let Some(n) = nbf {
        claims.insert("nbf".into(), n.into());
    }
    let token = sign_jwt(KEY, &serde_json::Value::Object(claims));

    let expected = match exp {
        Some(e) if e + LEEWAY_S > now => {
            if nbf.is_some_and(|n| n - LEEWAY_S > now) {
                Err(IdentityError::NotYetValid)
            } else {
                match &input.sub {
                    None => Err(IdentityError::Subject),
                    Some(s) => UserId::new(s).map_err(|_| IdentityError::Subject),
                }
            }
        }
        _ => Err(IdentityError::Expired),
    };
    assert_eq!(verify_jwt(KEY, &token, now), expected, "{token}");

    let mut bytes = token.clone().into_bytes();
    if bytes.is_empty() {
        return;
    }
    let at = input.at % bytes.len();
    bytes[at] = input.byte;
    if let Ok(tampered) = String::from_utf8(bytes) {
        if tampered != token {
            let got = verify_jwt(KEY, &tampered, now);
            assert!(
                got.is_err(),
                "tampered {tampered:?} (from {token:?}) verified: {got:?}"
            );
        }
    }
});
