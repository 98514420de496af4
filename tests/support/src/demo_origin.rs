//! A tiny shop behind the waiting room: a home page, a checkout page whose
//! button posts the order, and `POST /orders`, which accepts only requests
//! that carry a valid queuegate signature (the check every origin should
//! make; see README "Origin verification"). For demos and tests it can be
//! made to fail or slow down at run time: `POST /_demo/conditions`. With a
//! [`Login`] it is also the shop's login service for signed-in mode: it
//! mints short-lived HS256 login tokens and serves the token script the
//! waiting-room page loads (`PAGE_TOKEN_SCRIPT`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Html;
use axum::routing::{get, post};
use axum::{Json, Router};

/// The longest latency the shop can be told to add.
pub const MAX_LATENCY_MS: u64 = 60_000;

/// How the shop answers orders: a share of them with 503, every one after
/// a delay.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Conditions {
    /// Share of signed orders answered 503 (0 to 1), spread evenly.
    pub error_rate: f64,
    /// Added before every order's answer.
    pub latency_ms: u64,
}

impl Conditions {
    /// Checks the ranges.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.error_rate) {
            return Err(format!(
                "errorRate {} is not between 0 and 1",
                self.error_rate
            ));
        }
        if self.latency_ms > MAX_LATENCY_MS {
            return Err(format!(
                "latencyMs {} is above {MAX_LATENCY_MS}",
                self.latency_ms
            ));
        }
        Ok(())
    }

    /// These conditions changed by a `POST /_demo/conditions` body:
    /// `{"errorRate": 0..1, "latencyMs": n}`, either or both.
    pub fn updated(&self, body: &serde_json::Value) -> Result<Conditions, String> {
        let fields = body.as_object().ok_or(
            "the body must be a JSON object like {\"errorRate\": 0.5, \"latencyMs\": 200}",
        )?;
        if fields.is_empty() {
            return Err("give errorRate and/or latencyMs".into());
        }
        let mut next = *self;
        for (name, value) in fields {
            match name.as_str() {
                "errorRate" => {
                    next.error_rate = value
                        .as_f64()
                        .ok_or("errorRate must be a number from 0 to 1")?;
                }
                "latencyMs" => {
                    next.latency_ms = value
                        .as_u64()
                        .ok_or("latencyMs must be a whole number of milliseconds")?;
                }
                other => {
                    return Err(format!(
                        "unknown field {other:?}; fields are errorRate, latencyMs"
                    ))
                }
            }
        }
        next.validate()?;
        Ok(next)
    }

    fn json(&self) -> serde_json::Value {
        serde_json::json!({ "errorRate": self.error_rate, "latencyMs": self.latency_ms })
    }
}

/// The shop's login for signed-in mode (`IDENTITY_MODE=jwt`): the buyer is
/// the `demo_user` cookie; `GET /_demo/token` answers an HS256 JWT for
/// them living `lifetime_s`, signed with `jwt_secret` (the worker's
/// `JWT_SECRET`); `GET /_demo/queuegate-token.js` is the token script
/// (`PAGE_TOKEN_SCRIPT`); `GET /_demo/logins` counts the tokens minted per
/// buyer.
#[derive(Debug, Clone)]
pub struct Login {
    /// The worker's `JWT_SECRET`.
    pub jwt_secret: String,
    /// How long a token lives (its `exp` minus now).
    pub lifetime_s: u64,
}

/// The path of the demo shop's token script.
pub const TOKEN_SCRIPT: &str = "/_demo/queuegate-token.js";

/// The demo shop's token script: `window.queuegateToken()` as a shop
/// writes it over its login library. This one keeps its token until the
/// page asks for a fresh one (`forceRefresh`, after a 401), the worst a
/// library can do, so the page's refresh is what keeps a buyer signed in.
const TOKEN_JS: &str = r#"(() => {
  let token = null;
  window.queuegateToken = async ({ forceRefresh } = {}) => {
    if (!token || forceRefresh) {
      const r = await fetch("/_demo/token", { credentials: "same-origin", cache: "no-store" });
      token = r.ok ? await r.text() : null;
    }
    return token;
  };
})();
"#;

/// The demo shop's state.
#[derive(Debug)]
struct Shop {
    secret: Vec<u8>,
    orders: AtomicU64,
    conditions: Mutex<Conditions>,
    /// Signed orders received, and how many were answered 503 on purpose.
    attempts: AtomicU64,
    failed: AtomicU64,
    /// Signed-in mode's login, and the tokens minted per buyer.
    login: Option<Login>,
    minted: Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Shop {
    fn conditions(&self) -> Conditions {
        // Plain data: a poisoned lock still holds usable conditions.
        *self.conditions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The shop's router, verifying signatures with `secret`.
pub fn router(secret: &str, conditions: Conditions) -> Router {
    router_with(secret, conditions, None)
}

/// [`router`], with the login of signed-in mode when `login` is given.
pub fn router_with(secret: &str, conditions: Conditions, login: Option<Login>) -> Router {
    let shop = Arc::new(Shop {
        secret: secret.as_bytes().to_vec(),
        orders: AtomicU64::new(0),
        conditions: Mutex::new(conditions),
        attempts: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        login,
        minted: Mutex::new(Default::default()),
    });
    Router::new()
        .route("/_demo/token", get(login_token))
        .route(TOKEN_SCRIPT, get(token_script))
        .route("/_demo/logins", get(logins))
        .route("/", get(home))
        .route("/checkout", get(checkout))
        .route("/orders", post(order))
        .route("/tickets/{id}", get(ticket))
        .route(
            "/_demo/conditions",
            get(show_conditions).post(set_conditions),
        )
        .with_state(shop)
}

/// Why the shop did not start.
#[derive(Debug, thiserror::Error)]
pub enum ShopError {
    /// The conditions are out of range ([`Conditions::validate`]).
    #[error("{0}")]
    Conditions(String),
    /// No loopback port to listen on.
    #[error("cannot listen on loopback: {0}")]
    Listen(#[from] std::io::Error),
}

/// Starts the shop on a free loopback port; returns its URL.
pub async fn start(secret: &str) -> Result<String, ShopError> {
    start_with(secret, Conditions::default()).await
}

/// Starts the shop answering under `conditions` (validated).
pub async fn start_with(secret: &str, conditions: Conditions) -> Result<String, ShopError> {
    start_with_login(secret, conditions, None).await
}

/// [`start_with`], with the login of signed-in mode when `login` is given.
pub async fn start_with_login(
    secret: &str,
    conditions: Conditions,
    login: Option<Login>,
) -> Result<String, ShopError> {
    conditions.validate().map_err(ShopError::Conditions)?;
    let listener = tokio::net::TcpListener::bind((crate::LOOPBACK, 0)).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = router_with(secret, conditions, login);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}

/// `GET /_demo/token`: a login token for the buyer of the `demo_user`
/// cookie (401 without one, 404 without a login).
async fn login_token(State(shop): State<Arc<Shop>>, headers: HeaderMap) -> (StatusCode, String) {
    let Some(login) = &shop.login else {
        return (StatusCode::NOT_FOUND, "no login in this demo".into());
    };
    let cookies = headers
        .get("cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(user) = queuegate_edge::cookie::cookie(cookies, "demo_user") else {
        return (StatusCode::UNAUTHORIZED, "not signed in".into());
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let token = queuegate_edge::identity::sign_jwt(
        login.jwt_secret.as_bytes(),
        &serde_json::json!({ "sub": user, "iat": now, "exp": now + login.lifetime_s }),
    );
    let mut minted = shop.minted.lock().unwrap_or_else(|e| e.into_inner());
    *minted.entry(user.to_string()).or_default() += 1;
    (StatusCode::OK, token)
}

/// `GET /_demo/queuegate-token.js`: the token script (404 without a login).
async fn token_script(
    State(shop): State<Arc<Shop>>,
) -> (StatusCode, [(&'static str, &'static str); 1], &'static str) {
    match shop.login {
        Some(_) => (
            StatusCode::OK,
            [("content-type", "text/javascript")],
            TOKEN_JS,
        ),
        None => (
            StatusCode::NOT_FOUND,
            [("content-type", "text/plain")],
            "no login",
        ),
    }
}

/// `GET /_demo/logins`: `{"minted": {"<buyer>": n}}`.
async fn logins(State(shop): State<Arc<Shop>>) -> Json<serde_json::Value> {
    let minted = shop
        .minted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Json(serde_json::json!({ "minted": minted }))
}

async fn home() -> Html<&'static str> {
    Html(
        r#"<!doctype html><html lang="en"><meta charset="utf-8"><title>Demo shop</title>
<body style="font-family:system-ui;max-width:32rem;margin:3rem auto">
<h1>Demo shop — flash sale</h1>
<p>Tickets go on sale now. <a href="/queue">Join the queue</a>.</p>
<p>Or open <a href="/tickets/7">ticket 7</a> directly: without an entry token
the waiting room takes you in and sends you back.</p></body></html>"#,
    )
}

async fn checkout() -> Html<&'static str> {
    Html(
        r#"<!doctype html><html lang="en"><meta charset="utf-8"><title>Checkout</title>
<body style="font-family:system-ui;max-width:32rem;margin:3rem auto">
<h1>Checkout</h1>
<p>One ticket, ready to order.</p>
<button id="order" type="button">Place order</button>
<p id="result" role="status" aria-live="polite"></p>
<form method="post" action="/orders">
<input type="hidden" name="item" value="ticket">
<label>Seat <input name="seat" value="A 12"></label>
<button id="form-order" type="submit">Order with a form</button>
</form>
<script>
document.getElementById("order").addEventListener("click", async () => {
  const out = document.getElementById("result");
  out.textContent = "Placing your order…";
  const resp = await fetch("/orders", { method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify({ item: "ticket" }) });
  const body = await resp.json().catch(() => ({}));
  out.textContent = resp.ok ? "Order confirmed: #" + body.order
    : "The order did not go through (" + (body.message || resp.status) + ").";
});
</script></body></html>"#,
    )
}

/// The queue whose gate the shop's routes stand behind (the local
/// stack's `PROTECTED_ROUTES` bind them to `main`).
const QUEUE: &str = "main";

/// The README's origin check (*Origin verification*), whole: a user, this
/// route's queue, a time within a minute and the signature, compared in
/// constant time (`queuegate_edge::signing::passed`).
fn passed_the_gate(secret: &[u8], headers: &HeaderMap, method: &str, path: &str) -> bool {
    use queuegate_edge::signing::{self, Signed};
    let h = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let signed = Signed {
        user: h(signing::USER_HEADER),
        queue: h(signing::QUEUE_HEADER),
        time: h(signing::TIME_HEADER),
        signature: h(signing::SIGNATURE_HEADER),
    };
    signing::passed(secret, QUEUE, &signed, method, path, crate::now_ms())
}

/// `GET /tickets/{id}`: a protected page (the stack's `PROTECTED_ROUTES`
/// has `GET /tickets/*`), reached only through the gate: a person without
/// a token is sent to the room and back (edge/src/navigation.rs).
async fn ticket(
    State(shop): State<Arc<Shop>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> (StatusCode, Html<String>) {
    let path = format!("/tickets/{id}");
    let signed = passed_the_gate(&shop.secret, &headers, "GET", &path);
    let page = |title: &str, text: &str| {
        format!(
            r#"<!doctype html><html lang="en"><meta charset="utf-8"><title>{title}</title>
<body style="font-family:system-ui;max-width:32rem;margin:3rem auto"><h1 id="ticket">{title}</h1><p>{text}</p></body></html>"#
        )
    };
    // Ticket ids are digits: nothing else is echoed into the page.
    if !signed || id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || id.len() > 9 {
        return (
            StatusCode::UNAUTHORIZED,
            Html(page(
                "Not through the waiting room",
                "This page is reached only through the queue.",
            )),
        );
    }
    (
        StatusCode::OK,
        Html(page(
            &format!("Ticket {id} is yours"),
            "Reached through the waiting room.",
        )),
    )
}

async fn order(
    State(shop): State<Arc<Shop>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, Json<serde_json::Value>) {
    let h = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let user = h("x-queuegate-user");
    if !passed_the_gate(&shop.secret, &headers, "POST", "/orders") {
        return (
            StatusCode::UNAUTHORIZED,
            Json(
                serde_json::json!({ "error": "unsigned", "message": "not sent through the waiting room" }),
            ),
        );
    }
    // An order is empty, a JSON object or a plain form's fields (which
    // the reply shows); anything else is the visitor's mistake (a 4xx,
    // which the origin control leaves to the visitor).
    let form = h("content-type")
        .starts_with("application/x-www-form-urlencoded")
        .then(|| queuegate_edge::visit::form_fields(&String::from_utf8_lossy(&body)))
        .flatten();
    if form.is_none()
        && !body.is_empty()
        && !serde_json::from_slice::<serde_json::Value>(&body).is_ok_and(|v| v.is_object())
    {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(
                serde_json::json!({ "error": "bad_order", "message": "an order is a JSON object" }),
            ),
        );
    }
    let now = shop.conditions();
    if now.latency_ms > 0 {
        tokio::time::sleep(Duration::from_millis(now.latency_ms)).await;
    }
    // Fail exactly errorRate of the orders, spread evenly (no randomness,
    // so a run is repeatable).
    let n = shop.attempts.fetch_add(1, Ordering::SeqCst) as f64;
    if ((n + 1.0) * now.error_rate).floor() > (n * now.error_rate).floor() {
        shop.failed.fetch_add(1, Ordering::SeqCst);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(
                serde_json::json!({ "error": "unavailable", "message": "the shop is failing on purpose (/_demo/conditions)" }),
            ),
        );
    }
    let n = shop.orders.fetch_add(1, Ordering::SeqCst) + 1;
    let mut reply = serde_json::json!({ "order": n, "user": user });
    if let Some(fields) = form {
        let fields: serde_json::Map<String, serde_json::Value> =
            fields.into_iter().map(|(k, v)| (k, v.into())).collect();
        reply["fields"] = fields.into();
    }
    (StatusCode::CREATED, Json(reply))
}

/// `GET /_demo/conditions`: the conditions and what they did so far.
async fn show_conditions(State(shop): State<Arc<Shop>>) -> Json<serde_json::Value> {
    let mut body = shop.conditions().json();
    body["orders"] = shop.orders.load(Ordering::SeqCst).into();
    body["failed"] = shop.failed.load(Ordering::SeqCst).into();
    Json(body)
}

/// `POST /_demo/conditions`: change them; a bad body is a 400 and changes
/// nothing.
async fn set_conditions(
    State(shop): State<Arc<Shop>>,
    body: axum::body::Bytes,
) -> (StatusCode, Json<serde_json::Value>) {
    let bad = |message: String| {
        (
            StatusCode::BAD_REQUEST,
            Json(serde_json::json!({ "error": "bad_request", "message": message })),
        )
    };
    let value: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return bad(format!("the body is not JSON: {e}")),
    };
    let mut held = shop.conditions.lock().unwrap_or_else(|e| e.into_inner());
    match held.updated(&value) {
        Ok(next) => {
            *held = next;
            (StatusCode::OK, Json(next.json()))
        }
        Err(message) => bad(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_change_by_field_and_refuse_bad_input_whole() {
        let c = Conditions::default();
        let next = c
            .updated(&json!({"errorRate": 1, "latencyMs": 250}))
            .unwrap();
        assert_eq!(
            next,
            Conditions {
                error_rate: 1.0,
                latency_ms: 250
            }
        );
        let only = next.updated(&json!({"errorRate": 0.25})).unwrap();
        assert_eq!(
            only,
            Conditions {
                error_rate: 0.25,
                latency_ms: 250
            }
        );
        for bad in [
            json!({"errorRate": 1.5}),
            json!({"errorRate": -0.1}),
            json!({"errorRate": "half"}),
            json!({"latencyMs": -1}),
            json!({"latencyMs": 2.5}),
            json!({"latencyMs": 600_000}),
            json!({"errorRate": 0.5, "colour": "red"}),
            json!({}),
            json!([0.5]),
        ] {
            assert!(c.updated(&bad).is_err(), "{bad}");
        }
    }
}
