//! Signed-in drops with the shop's own login (issue 25): RS256 and ES256
//! tokens verified against a JWKS the edge fetches and caches, `aud` and
//! `iss` checked, and every known way around it refused (`alg: none`, an
//! HS256 token keyed with the public key, a key of the wrong type, an
//! unknown `kid` fetched again at most once a minute). A local stand-in of
//! the login service serves the JWKS; the tokens are signed with `ring`.
//! Real redis-server, the gateway, the wasm under workerd.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::header;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use queuegate_shared::Settings;
use queuegate_system_tests::edge::{EdgeStack, Visitor};
use queuegate_testkit::{free_port, RedisServer};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use serde_json::{json, Value};

const AUDIENCE: &str = "shop-api";
const ISSUER: &str = "https://login.test/";

/// The login service's stand-in: its JWKS (changed by the test), with a
/// long `max-age`, and how often it was fetched.
#[derive(Clone, Default)]
struct Login {
    keys: Arc<Mutex<Vec<Value>>>,
    fetches: Arc<AtomicU32>,
}

async fn jwks(State(login): State<Login>) -> impl axum::response::IntoResponse {
    login.fetches.fetch_add(1, Ordering::SeqCst);
    let keys = login.keys.lock().expect("keys").clone();
    (
        [(header::CACHE_CONTROL, "public, max-age=3600")],
        axum::Json(json!({ "keys": keys })),
    )
}

/// The test-only RSA keys (tests/system/fixtures/jwks-test-keys.json).
fn rsa_fixture(name: &str) -> (RsaKeyPair, Value) {
    let all: Value = serde_json::from_str(include_str!("../../fixtures/jwks-test-keys.json"))
        .expect("fixture JSON");
    let k = &all["keys"][name];
    let der = STANDARD
        .decode(k["pkcs8"].as_str().expect("pkcs8"))
        .expect("base64");
    let pair = RsaKeyPair::from_pkcs8(&der).expect("RSA key");
    let jwk =
        json!({"kty": "RSA", "kid": name, "use": "sig", "alg": "RS256", "n": k["n"], "e": k["e"]});
    (pair, jwk)
}

fn ec_key(kid: &str) -> (EcdsaKeyPair, Value) {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let der = EcdsaKeyPair::generate_pkcs8(alg, &rng).expect("EC key");
    let pair = EcdsaKeyPair::from_pkcs8(alg, der.as_ref(), &rng).expect("EC key");
    let point = pair.public_key().as_ref().to_vec();
    let jwk = json!({
        "kty": "EC", "crv": "P-256", "kid": kid,
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
    });
    (pair, jwk)
}

fn now_s() -> u64 {
    queuegate_testkit::since_epoch().as_secs()
}

/// Claims for `sub` that pass every check, with `extra` on top.
fn claims(sub: &str, extra: Value) -> Value {
    let mut c = json!({"sub": sub, "aud": AUDIENCE, "iss": ISSUER, "exp": now_s() + 600});
    for (k, v) in extra.as_object().into_iter().flatten() {
        c[k] = v.clone();
    }
    c
}

fn unsigned(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    )
}

fn rs256(key: &RsaKeyPair, kid: &str, claims: &Value) -> String {
    rs256_under(
        key,
        &json!({"alg": "RS256", "typ": "JWT", "kid": kid}),
        claims,
    )
}

/// An RS256 token under a header of the test's own.
fn rs256_under(key: &RsaKeyPair, header: &Value, claims: &Value) -> String {
    let input = unsigned(header, claims);
    let mut sig = vec![0; key.public().modulus_len()];
    key.sign(
        &signature::RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut sig,
    )
    .expect("RS256");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
}

fn es256(key: &EcdsaKeyPair, kid: &str, claims: &Value) -> String {
    let input = unsigned(&json!({"alg": "ES256", "typ": "JWT", "kid": kid}), claims);
    let sig = key
        .sign(&SystemRandom::new(), input.as_bytes())
        .expect("ES256");
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
}

async fn enter_as(stack: &EdgeStack, token: &str) -> (u16, String, Value) {
    let mut v: Visitor = stack.visitor();
    v.bearer = Some(token.to_string());
    let r = v.enter().await;
    (r.status, r.error().to_string(), r.json)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs256_and_es256_logins_pass_and_every_way_around_them_is_refused() {
    let login = Login::default();
    let (rsa1, rsa1_jwk) = rsa_fixture("rsa-1");
    let (rsa2, rsa2_jwk) = rsa_fixture("rsa-2");
    let (ec1, ec1_jwk) = ec_key("ec-1");
    *login.keys.lock().unwrap() = vec![rsa1_jwk.clone(), ec1_jwk];
    let app = axum::Router::new()
        .route("/.well-known/jwks.json", axum::routing::get(jwks))
        .with_state(login.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "http://{}/.well-known/jwks.json",
        listener.local_addr().unwrap()
    );
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough: false,
            ..Settings::default()
        },
        "jwt",
        RedisServer::start(),
        &[
            ("ENTRY_CHALLENGE", "off"),
            ("JWKS_URL", url.as_str()),
            ("JWT_AUDIENCE", AUDIENCE),
            ("JWT_ISSUER", ISSUER),
        ],
    )
    .await;

    // The shop's login: RS256 and ES256, each user its own place.
    let (status, _, json) =
        enter_as(&stack, &rs256(&rsa1, "rsa-1", &claims("alice", json!({})))).await;
    assert_eq!(
        (status, json["state"].as_str()),
        (200, Some("waiting")),
        "{json}"
    );
    let (status, _, json) = enter_as(&stack, &es256(&ec1, "ec-1", &claims("bob", json!({})))).await;
    assert_eq!(
        (status, json["state"].as_str()),
        (200, Some("waiting")),
        "{json}"
    );
    // The same user again is the same place, not a second one.
    let (status, _, json) =
        enter_as(&stack, &rs256(&rsa1, "rsa-1", &claims("alice", json!({})))).await;
    assert_eq!(
        (status, json["position"].as_u64()),
        (200, Some(1)),
        "{json}"
    );
    assert_eq!(
        login.fetches.load(Ordering::SeqCst),
        1,
        "one fetch, then the cache"
    );

    let before = stack.snapshot().await;
    let good = rs256(&rsa1, "rsa-1", &claims("mallory", json!({})));
    let (head, body, sig) = {
        let mut p = good.split('.');
        (p.next().unwrap(), p.next().unwrap(), p.next().unwrap())
    };
    let n = URL_SAFE_NO_PAD
        .decode(rsa1_jwk["n"].as_str().unwrap())
        .unwrap();
    let hs256_with_public_key = {
        let input = unsigned(
            &json!({"alg": "HS256", "kid": "rsa-1"}),
            &claims("mallory", json!({})),
        );
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &n);
        let tag = ring::hmac::sign(&key, input.as_bytes());
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(tag.as_ref()))
    };
    let tampered_body = URL_SAFE_NO_PAD.encode(claims("alice", json!({})).to_string());
    let refused = [
        (
            "alg none",
            format!(
                "{}.",
                unsigned(&json!({"alg": "none"}), &claims("mallory", json!({})))
            ),
        ),
        ("HS256 keyed with the RSA public key", hs256_with_public_key),
        (
            "an RS256 token naming the EC key",
            rs256(&rsa1, "ec-1", &claims("mallory", json!({}))),
        ),
        (
            "an ES256 token naming the RSA key",
            es256(&ec1, "rsa-1", &claims("mallory", json!({}))),
        ),
        (
            "expired",
            rs256(
                &rsa1,
                "rsa-1",
                &claims("mallory", json!({"exp": now_s() - 120})),
            ),
        ),
        (
            "another audience",
            rs256(
                &rsa1,
                "rsa-1",
                &claims("mallory", json!({"aud": "other-api"})),
            ),
        ),
        (
            "another issuer",
            rs256(
                &rsa1,
                "rsa-1",
                &claims("mallory", json!({"iss": "https://evil.test/"})),
            ),
        ),
        (
            "a critical extension (issue #38)",
            rs256_under(
                &rsa1,
                &json!({"alg": "RS256", "kid": "rsa-1", "crit": ["exp"]}),
                &claims("mallory", json!({})),
            ),
        ),
        (
            "a logout token signed by the same keys",
            rs256_under(
                &rsa1,
                &json!({"alg": "RS256", "kid": "rsa-1", "typ": "logout+jwt"}),
                &claims("mallory", json!({})),
            ),
        ),
        (
            "a refresh token (`token_use`)",
            rs256(
                &rsa1,
                "rsa-1",
                &claims("mallory", json!({"token_use": "refresh"})),
            ),
        ),
        ("a changed payload", format!("{head}.{tampered_body}.{sig}")),
        ("no signature", format!("{head}.{body}.")),
        ("garbage", "not.a.jwt".to_string()),
    ];
    for (what, token) in &refused {
        let (status, error, json) = enter_as(&stack, token).await;
        assert_eq!(
            (status, error.as_str()),
            (401, "identity_invalid"),
            "{what}: {json}"
        );
    }
    assert_eq!(stack.snapshot().await, before, "a refused login wrote");

    // Key rotation: a token signed with a key published after the set was
    // fetched makes the edge fetch it again, once.
    login.keys.lock().unwrap().push(rsa2_jwk);
    let (status, _, json) =
        enter_as(&stack, &rs256(&rsa2, "rsa-2", &claims("carol", json!({})))).await;
    assert_eq!(
        (status, json["state"].as_str()),
        (200, Some("waiting")),
        "{json}"
    );
    assert_eq!(login.fetches.load(Ordering::SeqCst), 2);
    // Made-up key ids cannot make it fetch again within the minute.
    for i in 0..20 {
        let token = rs256(
            &rsa1,
            &format!("made-up-{i}"),
            &claims("mallory", json!({})),
        );
        let (status, error, _) = enter_as(&stack, &token).await;
        assert_eq!((status, error.as_str()), (401, "identity_invalid"));
    }
    assert_eq!(
        login.fetches.load(Ordering::SeqCst),
        2,
        "unknown kids are bounded"
    );
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_login_service_is_an_outage_not_a_refusal() {
    let dead = format!("http://127.0.0.1:{}/.well-known/jwks.json", free_port());
    let stack = EdgeStack::start_with(
        Settings::default(),
        "jwt",
        RedisServer::start(),
        &[
            ("ENTRY_CHALLENGE", "off"),
            ("JWKS_URL", dead.as_str()),
            ("JWT_ISSUER", ISSUER),
        ],
    )
    .await;
    let (rsa1, _) = rsa_fixture("rsa-1");
    let token = rs256(&rsa1, "rsa-1", &claims("alice", json!({})));
    let mut v = stack.visitor();
    v.bearer = Some(token);
    let r = v.enter().await;
    assert_eq!((r.status, r.error()), (503, "unavailable"), "{:?}", r.json);
    assert_eq!(r.retry_after, Some(5));
    // An invalid token is still refused as invalid, without asking.
    let mut m = stack.visitor();
    m.bearer = Some(format!(
        "{}.",
        unsigned(&json!({"alg": "none"}), &claims("m", json!({})))
    ));
    let r = m.enter().await;
    assert_eq!((r.status, r.error()), (401, "identity_invalid"));
}

/// Issue #38: a key set that signs for more than this shop needs the
/// claims that say whose token it is. `JWKS_URL` without `JWT_ISSUER`, or
/// a key set every Firebase project shares without `JWT_AUDIENCE`, stops
/// the worker: every route answers 500 `misconfigured` and the log names
/// the variable to set, rather than take any project's users as the
/// shop's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_key_set_without_its_claims_stops_the_worker() {
    let firebase =
        "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com";
    for (vars, names) in [
        (vec![("JWKS_URL", firebase)], "JWT_ISSUER"),
        (
            vec![
                ("JWKS_URL", firebase),
                ("JWT_ISSUER", "https://securetoken.google.com/shop"),
            ],
            "JWT_AUDIENCE",
        ),
    ] {
        let mut all = vec![("ENTRY_CHALLENGE", "off")];
        all.extend(vars);
        let stack =
            EdgeStack::start_with(Settings::default(), "jwt", RedisServer::start(), &all).await;
        let before = stack.snapshot().await;
        let r = stack.visitor().enter().await;
        assert_eq!(
            (r.status, r.error()),
            (500, "misconfigured"),
            "{:?}",
            r.json
        );
        assert_eq!(
            stack.snapshot().await,
            before,
            "a misconfigured worker wrote"
        );
        // The runtime writes the worker's console output a moment later.
        let named = queuegate_testkit::wait_until(std::time::Duration::from_secs(5), || {
            stack.worker.log().contains(names)
        });
        assert!(named, "the log names {names}: {}", stack.worker.log());
    }
}
