//! A local stand-in for Cloudflare Turnstile (`queuegate-dev
//! --turnstile-stand-in`, the browser tests): its widget script and its
//! `siteverify`, on loopback, so the page's Turnstile path runs without
//! the internet. The widget is one button; clicking it "solves" the check
//! with a token that names the outcome and the page's host
//! (`pass/<host>/<nonce>`; `window.turnstileStandIn = "fail"` makes the
//! next one fail), and `siteverify` answers as Turnstile documents: each
//! token once, `hostname` the host it was solved on.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::header;
use axum::routing::{get, post};
use axum::{Form, Json, Router};

/// The stand-in's site key (what the page renders the widget with).
pub const SITE_KEY: &str = "stand-in-site-key";
/// The stand-in's secret key (what the worker sends to `siteverify`).
pub const SECRET_KEY: &str = "stand-in-secret-key";

/// The widget script: `window.turnstile` with `render`, `reset` and
/// `remove`, as the page uses them.
const SCRIPT: &str = r#"// queuegate's local stand-in for Turnstile's api.js (tests and the demo only).
(() => {
  const widgets = [];
  window.turnstile = {
    render(el, opts) {
      const box = typeof el === "string" ? document.querySelector(el) : el;
      const b = document.createElement("button");
      b.type = "button";
      b.className = "ts-stand-in";
      b.textContent = "Verify you are human (local Turnstile stand-in)";
      b.addEventListener("click", () => {
        const kind = window.turnstileStandIn || "pass";
        window.turnstileStandIn = undefined;
        opts.callback(kind + "/" + location.hostname + "/" + Math.random().toString(36).slice(2));
      });
      box.appendChild(b);
      widgets.push(b);
      return String(widgets.length - 1);
    },
    reset() {},
    remove(id) { const b = widgets[Number(id)]; if (b) b.remove(); },
  };
})();
"#;

#[derive(Debug, Default)]
struct Seen {
    tokens: Mutex<HashSet<String>>,
}

/// Starts the stand-in on a free loopback port; returns the widget
/// script's URL and `siteverify`'s.
pub async fn start() -> anyhow::Result<(String, String)> {
    let app = Router::new()
        .route(
            "/turnstile/v0/api.js",
            get(|| async { ([(header::CONTENT_TYPE, "text/javascript")], SCRIPT) }),
        )
        .route("/turnstile/v0/siteverify", post(siteverify))
        .with_state(Arc::new(Seen::default()));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}/turnstile/v0", listener.local_addr()?);
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((format!("{base}/api.js"), format!("{base}/siteverify")))
}

async fn siteverify(
    State(seen): State<Arc<Seen>>,
    Form(form): Form<Vec<(String, String)>>,
) -> Json<serde_json::Value> {
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map_or("", |(_, v)| v.as_str())
    };
    let refuse = |code: &str| {
        eprintln!("turnstile stand-in: siteverify refused ({code})");
        Json(serde_json::json!({ "success": false, "error-codes": [code] }))
    };
    if get("secret") != SECRET_KEY {
        return refuse("invalid-input-secret");
    }
    let token = get("response");
    let mut parts = token.splitn(3, '/');
    let (kind, host) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let first = seen
        .tokens
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(token.to_string());
    match kind {
        _ if !first => refuse("timeout-or-duplicate"),
        "pass" if !host.is_empty() => Json(serde_json::json!({
            "success": true, "error-codes": [], "hostname": host, "action": ""
        })),
        _ => refuse("invalid-input-response"),
    }
}
