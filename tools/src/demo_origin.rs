//! A tiny shop behind the waiting room: a home page, a checkout page whose
//! button posts the order, and `POST /orders`, which accepts only requests
//! that carry a valid queuegate signature (the check every origin should
//! make; see README "Origin verification").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Html;
use axum::routing::{get, post};
use axum::{Json, Router};

/// The demo shop's state.
#[derive(Debug)]
struct Shop {
    secret: Vec<u8>,
    orders: AtomicU64,
}

/// The shop's router, verifying signatures with `secret`.
pub fn router(secret: &str) -> Router {
    let shop = Arc::new(Shop {
        secret: secret.as_bytes().to_vec(),
        orders: AtomicU64::new(0),
    });
    Router::new()
        .route("/", get(home))
        .route("/checkout", get(checkout))
        .route("/orders", post(order))
        .with_state(shop)
}

/// Starts the shop on a free loopback port; returns its URL.
pub async fn start(secret: &str) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = router(secret);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(url)
}

async fn home() -> Html<&'static str> {
    Html(
        r#"<!doctype html><html lang="en"><meta charset="utf-8"><title>Demo shop</title>
<body style="font-family:system-ui;max-width:32rem;margin:3rem auto">
<h1>Demo shop — flash sale</h1>
<p>Tickets go on sale now. <a href="/queue">Join the queue</a>.</p></body></html>"#,
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

async fn order(
    State(shop): State<Arc<Shop>>,
    headers: HeaderMap,
) -> (StatusCode, Json<serde_json::Value>) {
    let h = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let (user, queue, time) = (
        h("x-queuegate-user"),
        h("x-queuegate-queue"),
        h("x-queuegate-time"),
    );
    let expected = time
        .parse::<u64>()
        .ok()
        .map(|t| queuegate_edge::signing::sign(&shop.secret, queue, user, t, "POST", "/orders"));
    if user.is_empty() || expected.as_deref() != Some(h("x-queuegate-signature")) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(
                serde_json::json!({ "error": "unsigned", "message": "not sent through the waiting room" }),
            ),
        );
    }
    let n = shop.orders.fetch_add(1, Ordering::SeqCst) + 1;
    (
        StatusCode::CREATED,
        Json(serde_json::json!({ "order": n, "user": user })),
    )
}
