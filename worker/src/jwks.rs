//! RS256 and ES256 login tokens, verified with the keys the login service
//! publishes at `JWKS_URL` (README, *Signed-in drops with your login*).
//! The key set is fetched by the edge and kept per isolate as long as its
//! `Cache-Control` says (1 minute … 1 day, `queuegate_edge::jwks`); a token
//! naming a key the set lacks makes the isolate fetch it again at most once
//! a minute, so visitors cannot make it call the login service at will.
//! The signature is checked by the runtime's WebCrypto (`importKey` once
//! per key), so the wasm carries no RSA or elliptic-curve code.

use std::cell::RefCell;

use queuegate_edge::identity::{parse_jwt, Expect, IdentityError, VerifiedJwt};
use queuegate_edge::jwks::{self, Alg, Jwk};
use wasm_bindgen::prelude::wasm_bindgen;
use worker::js_sys;
use worker::wasm_bindgen_futures::JsFuture;

use crate::error::EdgeError;
use crate::subrequest;

/// Longest wait for the key set.
const FETCH_TIMEOUT_MS: u32 = 3_000;
/// A token with an unknown key makes the isolate fetch the set again at
/// most this often.
const FORCED_EVERY_MS: u64 = 60_000;
/// After a failed fetch, the keys held are used this long before the next
/// try (and none are used once a day past their freshness).
const RETRY_MS: u64 = 60_000;
/// How long past its freshness a set is still used while the login service
/// cannot be reached.
const STALE_LIMIT_MS: u64 = 86_400_000;

#[derive(Debug, Default)]
struct Held {
    url: String,
    keys: Vec<Jwk>,
    fetched: bool,
    fresh_until_ms: u64,
    stale_until_ms: u64,
    next_forced_ms: u64,
}

thread_local! {
    // One per isolate (wasm has one thread); never borrowed across an await.
    static HELD: RefCell<Held> = RefCell::new(Held::default());
}

#[wasm_bindgen(inline_js = r#"
const imported = new Map();
export async function verify_signature(alg, jwk, data, sig) {
  let key = imported.get(jwk);
  if (!key) {
    if (imported.size >= 64) imported.clear();
    const params = alg === "RS256"
      ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
      : { name: "ECDSA", namedCurve: "P-256" };
    key = crypto.subtle.importKey("jwk", JSON.parse(jwk), params, false, ["verify"]);
    imported.set(jwk, key);
  }
  const algo = alg === "RS256" ? { name: "RSASSA-PKCS1-v1_5" } : { name: "ECDSA", hash: "SHA-256" };
  try {
    return await crypto.subtle.verify(algo, await key, sig, data);
  } catch (e) {
    imported.delete(jwk);
    return false;
  }
}
"#)]
extern "C" {
    fn verify_signature(alg: &str, jwk: &str, data: &[u8], sig: &[u8]) -> js_sys::Promise;
}

/// The user of an RS256 or ES256 `token`, verified with `url`'s keys at
/// `now_ms`; `alg: none`, HS256 and every other algorithm are refused
/// before any key is looked at.
pub async fn verify(
    url: &str,
    token: &str,
    now_ms: u64,
    expect: &Expect<'_>,
) -> Result<VerifiedJwt, EdgeError> {
    let invalid = EdgeError::IdentityInvalid;
    let parsed = parse_jwt(token).map_err(invalid)?;
    let alg = Alg::from_header(&parsed.alg).ok_or(invalid(IdentityError::Algorithm))?;
    let kid = parsed.kid.as_deref();
    if needs_fetch(url, now_ms) {
        refresh(url, now_ms).await?;
    }
    let mut key = pick(alg, kid);
    if key.is_none() && worth_refetching(alg, kid) && forced_fetch_allowed(now_ms) {
        refresh(url, now_ms).await?;
        key = pick(alg, kid);
    }
    let key = key.ok_or(invalid(IdentityError::UnknownKey))?;
    let verified = JsFuture::from(verify_signature(
        alg.as_str(),
        &key.public,
        parsed.signing_input.as_bytes(),
        &parsed.signature,
    ))
    .await
    .ok()
    .and_then(|v| v.as_bool())
    .unwrap_or(false);
    if !verified {
        return Err(invalid(IdentityError::BadSignature));
    }
    parsed
        .verified(now_ms as f64 / 1_000.0, expect)
        .map_err(invalid)
}

fn needs_fetch(url: &str, now_ms: u64) -> bool {
    HELD.with(|h| {
        let h = h.borrow();
        h.url != url || !h.fetched || now_ms >= h.fresh_until_ms
    })
}

fn pick(alg: Alg, kid: Option<&str>) -> Option<Jwk> {
    HELD.with(|h| jwks::select(&h.borrow().keys, alg, kid).cloned())
}

fn worth_refetching(alg: Alg, kid: Option<&str>) -> bool {
    HELD.with(|h| jwks::worth_refetching(&h.borrow().keys, alg, kid))
}

fn forced_fetch_allowed(now_ms: u64) -> bool {
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if now_ms < h.next_forced_ms {
            return false;
        }
        h.next_forced_ms = now_ms + FORCED_EVERY_MS;
        true
    })
}

/// Fetches the key set; on failure keeps the keys held (up to a day past
/// their freshness) and tries again after [`RETRY_MS`]. Without any keys,
/// a failure is a 503: the login service's keys cannot be read.
async fn refresh(url: &str, now_ms: u64) -> Result<(), EdgeError> {
    // Mark the attempt first: requests meanwhile use what is held.
    HELD.with(|h| {
        let mut h = h.borrow_mut();
        if h.url != url {
            *h = Held {
                url: url.to_string(),
                ..Held::default()
            };
        }
        h.fresh_until_ms = now_ms + RETRY_MS;
    });
    match fetch(url).await {
        Ok((keys, max_age_s)) => {
            HELD.with(|h| {
                let mut h = h.borrow_mut();
                h.keys = keys;
                h.fetched = true;
                h.fresh_until_ms = now_ms + max_age_s * 1_000;
                h.stale_until_ms = h.fresh_until_ms + STALE_LIMIT_MS;
            });
            Ok(())
        }
        Err(why) => {
            worker::console_warn!("jwks: {url}: {why}");
            let usable = HELD.with(|h| {
                let mut h = h.borrow_mut();
                if now_ms >= h.stale_until_ms {
                    h.keys.clear();
                }
                !h.keys.is_empty()
            });
            if usable {
                Ok(())
            } else {
                Err(EdgeError::KeysUnavailable(why))
            }
        }
    }
}

async fn fetch(url: &str) -> Result<(Vec<Jwk>, u64), String> {
    let reply = subrequest::text("GET", url, "", "", FETCH_TIMEOUT_MS, jwks::MAX_BYTES).await?;
    if reply.status != 200 {
        return Err(format!("answered {}", reply.status));
    }
    if reply.too_large {
        return Err(jwks::JwksError::TooLarge.to_string());
    }
    let keys = jwks::parse(&reply.text).map_err(|e| e.to_string())?;
    let cache_control = Some(reply.cache_control.as_str()).filter(|c| !c.is_empty());
    Ok((keys, jwks::max_age_s(cache_control)))
}
