//! Who sent a request: the signed visitor cookie (minted on a first enter)
//! or the shop's JWT, checked with `queuegate_edge::identity` once per
//! isolate while it holds ([`crate::verified`]).

use std::cell::RefCell;

use queuegate_edge::cookie::{cookie, set_cookie, VISITOR_COOKIE};
use queuegate_edge::identity::{self, IdentityError, Key};
use queuegate_shared::UserId;

use crate::config::IdentityMode;
use crate::error::EdgeError;
use crate::http::Request;
use crate::verified::{VerifiedTokens, KEEP_S};

/// Lifetime of the visitor cookie: a day covers any sale.
pub const VISITOR_COOKIE_MAX_AGE_S: u64 = 86_400;

thread_local! {
    // The JWTs or visitor cookies this isolate verified (wasm has one
    // thread); never borrowed across an await.
    static VERIFIED: RefCell<VerifiedTokens> = RefCell::new(VerifiedTokens::default());
}

/// Who sent a request, and the cookie to set if we just minted them.
#[derive(Debug)]
pub struct Visitor {
    /// The verified user id.
    pub user: UserId,
    /// `Set-Cookie` for a newly minted visitor.
    pub new_cookie: Option<String>,
}

/// What a request presents as identity, read from its headers.
#[derive(Debug, Default)]
pub struct Presented<'a> {
    /// The `Cookie` header, or empty.
    pub cookies: &'a str,
    /// The token of `Authorization: Bearer <token>`.
    pub bearer: Option<&'a str>,
}

impl<'a> Presented<'a> {
    /// The `Cookie` header, and `Authorization` when `mode` looks at it
    /// (JWT mode), from the request line read on arrival.
    pub fn from_request(mode: &IdentityMode, req: &'a Request) -> Presented<'a> {
        Presented {
            cookies: req.cookies(),
            bearer: match mode {
                IdentityMode::Jwt { .. } => req.authorization().strip_prefix("Bearer "),
                IdentityMode::Anonymous { .. } => None,
            },
        }
    }
}

/// The request's identity. `mint` lets an anonymous newcomer get one. An
/// RS256/ES256 token is checked against the login service's keys
/// (`crate::jwks`), which may need fetching; everything else is
/// [`check`].
pub async fn identify(
    mode: &IdentityMode,
    cookie_secure: bool,
    req: &Request,
    mint: bool,
) -> Result<Visitor, EdgeError> {
    let presented = Presented::from_request(mode, req);
    if let IdentityMode::Jwt {
        jwks: Some(url),
        cookie: name,
        ..
    } = mode
    {
        let token = jwt_of(&presented, name.as_deref())?;
        let now_ms = crate::clock::now_ms();
        let known = VERIFIED.with(|v| v.borrow_mut().get(token, now_ms as f64 / 1_000.0));
        let user = match known {
            Some(user) => user,
            None => {
                let verified = crate::jwks::verify(url, token, now_ms, &mode.expect()).await;
                VERIFIED.with(|v| v.borrow_mut().remember(token, verified))?
            }
        };
        return Ok(Visitor {
            user,
            new_cookie: None,
        });
    }
    // A JWT's `exp`/`nbf`, and how long a checked cookie is kept.
    let now_s = crate::clock::now_ms() as f64 / 1_000.0;
    VERIFIED.with(|v| {
        check(
            mode,
            cookie_secure,
            &presented,
            now_s,
            mint,
            &mut v.borrow_mut(),
        )
    })
}

/// The JWT a request presents: `Authorization: Bearer`, else the cookie.
fn jwt_of<'a>(presented: &Presented<'a>, cookie_name: Option<&str>) -> Result<&'a str, EdgeError> {
    let from_cookie = cookie_name.and_then(|name| cookie(presented.cookies, name));
    presented
        .bearer
        .or(from_cookie)
        .ok_or(EdgeError::IdentityRequired)
}

/// [`identify`] without the runtime: the headers, the clock and the
/// JWTs verified before as inputs.
pub fn check(
    mode: &IdentityMode,
    cookie_secure: bool,
    presented: &Presented,
    now_s: f64,
    mint: bool,
    known: &mut VerifiedTokens,
) -> Result<Visitor, EdgeError> {
    let user = match mode {
        IdentityMode::Anonymous { secret } => match cookie(presented.cookies, VISITOR_COOKIE) {
            // Kept like a JWT (an isolate serves one identity mode); the
            // cookie has no expiry, so it is kept for `KEEP_S`.
            Some(value) => match known.get(value, now_s) {
                Some(user) => Ok(user),
                None => identity::verify_visitor(secret, value)
                    .inspect(|user| known.keep(value, user.clone(), now_s + KEEP_S)),
            },
            None if mint => return mint_visitor(secret, cookie_secure),
            None => return Err(EdgeError::IdentityRequired),
        },
        // With a JWKS, `identify` verifies; HS256 is never tried with the
        // place-cookie key.
        IdentityMode::Jwt { jwks: Some(_), .. } => Err(IdentityError::Algorithm),
        IdentityMode::Jwt {
            secret,
            cookie: name,
            ..
        } => {
            let token = jwt_of(presented, name.as_deref())?;
            match known.get(token, now_s) {
                Some(user) => Ok(user),
                None => known.remember(
                    token,
                    identity::verify_hs256(secret, token, now_s, &mode.expect()),
                ),
            }
        }
    };
    Ok(Visitor {
        user: user.map_err(EdgeError::IdentityInvalid)?,
        new_cookie: None,
    })
}

fn mint_visitor(secret: &Key, cookie_secure: bool) -> Result<Visitor, EdgeError> {
    let (user, value) = identity::mint_visitor(secret, crate::random::bytes()?);
    Ok(Visitor {
        user,
        new_cookie: Some(set_cookie(
            VISITOR_COOKIE,
            &value,
            VISITOR_COOKIE_MAX_AGE_S,
            cookie_secure,
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_edge::identity::{sign_jwt, IdentityError};

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";
    const NOW: f64 = 1_764_669_600.0;

    fn anonymous() -> IdentityMode {
        IdentityMode::Anonymous {
            secret: Key::new(KEY),
        }
    }

    fn known() -> VerifiedTokens {
        VerifiedTokens::default()
    }

    fn cookies(text: &str) -> Presented<'_> {
        Presented {
            cookies: text,
            bearer: None,
        }
    }

    #[test]
    fn anonymous_visitors_are_minted_only_on_enter() {
        let none = Presented::default();
        let err = check(&anonymous(), true, &none, NOW, false, &mut known()).unwrap_err();
        assert_eq!(err, EdgeError::IdentityRequired);
        let minted = check(&anonymous(), true, &none, NOW, true, &mut known()).unwrap();
        let set = minted.new_cookie.unwrap();
        assert!(
            set.starts_with("qg_visitor=") && set.ends_with("; Secure"),
            "{set}"
        );
        let value = set.split(';').next().unwrap();
        let again = check(&anonymous(), true, &cookies(value), NOW, true, &mut known()).unwrap();
        assert_eq!((again.user, again.new_cookie), (minted.user, None));
        let forged = check(
            &anonymous(),
            true,
            &cookies("qg_visitor=a.b"),
            NOW,
            true,
            &mut known(),
        );
        assert_eq!(
            forged.unwrap_err(),
            EdgeError::IdentityInvalid(IdentityError::Malformed)
        );
        // Checked once per isolate: kept, and answered the same again; a
        // cookie of the same visitor with another MAC is checked, and refused.
        let mut table = known();
        let first = check(&anonymous(), true, &cookies(value), NOW, false, &mut table).unwrap();
        let kept = check(&anonymous(), true, &cookies(value), NOW, false, &mut table).unwrap();
        assert_eq!(first.user, kept.user);
        assert_eq!(table.len(), 1);
        let (id, mac) = value.split_once('.').unwrap();
        let other_mac = if mac.starts_with('A') { "B" } else { "A" };
        let edited = format!("{id}.{other_mac}{}", &mac[1..]);
        let refused = check(
            &anonymous(),
            true,
            &cookies(&edited),
            NOW,
            false,
            &mut table,
        );
        assert!(refused.is_err(), "{edited}");
        assert_eq!(table.len(), 1, "a failure is never kept");
    }

    #[test]
    fn jwts_come_from_bearer_first_then_the_cookie() {
        let mode = IdentityMode::Jwt {
            secret: Key::new(KEY),
            cookie: Some("session".into()),
            jwks: None,
            audience: None,
            issuer: None,
        };
        let jwt = |sub: &str| sign_jwt(KEY, &serde_json::json!({"sub": sub, "exp": NOW + 60.0}));
        let (cookie_header, bearer) = (
            format!("session={}", jwt("from-cookie")),
            jwt("from-bearer"),
        );
        let both = Presented {
            cookies: &cookie_header,
            bearer: Some(&bearer),
        };
        let v = check(&mode, true, &both, NOW, true, &mut known()).unwrap();
        assert_eq!((v.user.as_str(), v.new_cookie), ("from-bearer", None));
        let cookie_header = format!("session={}", jwt("from-cookie"));
        let cookie_only = cookies(&cookie_header);
        let v = check(&mode, true, &cookie_only, NOW, true, &mut known()).unwrap();
        assert_eq!(v.user.as_str(), "from-cookie");
        let nothing = check(&mode, true, &Presented::default(), NOW, true, &mut known());
        assert_eq!(nothing.unwrap_err(), EdgeError::IdentityRequired);
    }

    #[test]
    fn a_jwt_verified_once_is_known_to_the_isolate_until_its_exp() {
        let mode = IdentityMode::Jwt {
            secret: Key::new(KEY),
            cookie: None,
            jwks: None,
            audience: None,
            issuer: None,
        };
        fn bearer(token: &str) -> Presented<'_> {
            Presented {
                cookies: "",
                bearer: Some(token),
            }
        }
        let exp = NOW + 60.0;
        let token = sign_jwt(KEY, &serde_json::json!({"sub": "u1", "exp": exp}));
        let mut known = known();
        let v = check(&mode, true, &bearer(&token), NOW, false, &mut known).unwrap();
        assert_eq!(v.user.as_str(), "u1");
        assert_eq!(known.len(), 1);
        assert_eq!(known.get(&token, NOW + 1.0).unwrap().as_str(), "u1");
        // A token that fails is refused and never kept.
        let other_key = b"fedcba9876543210fedcba9876543210";
        let forged = sign_jwt(other_key, &serde_json::json!({"sub": "u1", "exp": exp}));
        let err = check(&mode, true, &bearer(&forged), NOW, false, &mut known);
        assert_eq!(
            err.unwrap_err(),
            EdgeError::IdentityInvalid(IdentityError::BadSignature)
        );
        assert_eq!(known.get(&forged, NOW), None);
        assert_eq!(known.len(), 1);
        // Past its exp (and the skew) it is verified anew, and refused.
        let late = check(&mode, true, &bearer(&token), exp + 30.0, false, &mut known);
        assert_eq!(
            late.unwrap_err(),
            EdgeError::IdentityInvalid(IdentityError::Expired)
        );
        assert!(known.is_empty());
    }
}
