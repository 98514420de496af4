//! Who sent a request: the signed visitor cookie (minted on a first enter)
//! or the shop's JWT, checked with `queuegate_edge::identity`.

use queuegate_edge::cookie::{cookie, set_cookie, VISITOR_COOKIE};
use queuegate_edge::identity::{self, IdentityError, Key};
use queuegate_shared::UserId;
use worker::Date;

use crate::config::IdentityMode;
use crate::error::EdgeError;
use crate::http::Request;

/// Lifetime of the visitor cookie: a day covers any sale.
pub const VISITOR_COOKIE_MAX_AGE_S: u64 = 86_400;

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
pub struct Presented {
    /// The `Cookie` header, or empty.
    pub cookies: String,
    /// The token of `Authorization: Bearer <token>`.
    pub bearer: Option<String>,
}

impl Presented {
    /// Reads the `Cookie` header, and `Authorization` when `mode` looks at
    /// it (JWT mode): each header read is a call into the runtime.
    pub fn from_request(mode: &IdentityMode, req: &Request) -> Presented {
        let header = |name: &str| req.headers().get(name).ok().flatten();
        Presented {
            cookies: req.cookies().to_string(),
            bearer: match mode {
                IdentityMode::Jwt { .. } => header("authorization")
                    .and_then(|h| h.strip_prefix("Bearer ").map(str::to_string)),
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
        let user = crate::jwks::verify(url, token, Date::now().as_millis(), &mode.expect()).await?;
        return Ok(Visitor {
            user,
            new_cookie: None,
        });
    }
    // Only a JWT's `exp`/`nbf` need the clock (a call into the runtime).
    let now_s = match mode {
        IdentityMode::Jwt { .. } => Date::now().as_millis() as f64 / 1_000.0,
        IdentityMode::Anonymous { .. } => 0.0,
    };
    check(mode, cookie_secure, &presented, now_s, mint)
}

/// The JWT a request presents: `Authorization: Bearer`, else the cookie.
fn jwt_of<'a>(presented: &'a Presented, cookie_name: Option<&str>) -> Result<&'a str, EdgeError> {
    let from_cookie = cookie_name.and_then(|name| cookie(&presented.cookies, name));
    presented
        .bearer
        .as_deref()
        .or(from_cookie)
        .ok_or(EdgeError::IdentityRequired)
}

/// [`identify`] without the runtime: the headers and the clock as inputs.
pub fn check(
    mode: &IdentityMode,
    cookie_secure: bool,
    presented: &Presented,
    now_s: f64,
    mint: bool,
) -> Result<Visitor, EdgeError> {
    let user = match mode {
        IdentityMode::Anonymous { secret } => match cookie(&presented.cookies, VISITOR_COOKIE) {
            Some(value) => identity::verify_visitor(secret, value),
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
            identity::verify_jwt_expecting(secret, token, now_s, &mode.expect())
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

    fn cookies(text: &str) -> Presented {
        Presented {
            cookies: text.into(),
            bearer: None,
        }
    }

    #[test]
    fn anonymous_visitors_are_minted_only_on_enter() {
        let none = Presented::default();
        let err = check(&anonymous(), true, &none, NOW, false).unwrap_err();
        assert_eq!(err, EdgeError::IdentityRequired);
        let minted = check(&anonymous(), true, &none, NOW, true).unwrap();
        let set = minted.new_cookie.unwrap();
        assert!(
            set.starts_with("qg_visitor=") && set.ends_with("; Secure"),
            "{set}"
        );
        let value = set.split(';').next().unwrap();
        let again = check(&anonymous(), true, &cookies(value), NOW, true).unwrap();
        assert_eq!((again.user, again.new_cookie), (minted.user, None));
        let forged = check(&anonymous(), true, &cookies("qg_visitor=a.b"), NOW, true);
        assert_eq!(
            forged.unwrap_err(),
            EdgeError::IdentityInvalid(IdentityError::Malformed)
        );
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
        let both = Presented {
            cookies: format!("session={}", jwt("from-cookie")),
            bearer: Some(jwt("from-bearer")),
        };
        let v = check(&mode, true, &both, NOW, true).unwrap();
        assert_eq!((v.user.as_str(), v.new_cookie), ("from-bearer", None));
        let cookie_only = cookies(&format!("session={}", jwt("from-cookie")));
        let v = check(&mode, true, &cookie_only, NOW, true).unwrap();
        assert_eq!(v.user.as_str(), "from-cookie");
        let nothing = check(&mode, true, &Presented::default(), NOW, true);
        assert_eq!(nothing.unwrap_err(), EdgeError::IdentityRequired);
    }
}
