//! The admin API's door: a request passes only with a configured token
//! (`Authorization: Bearer …`), and the route sees the token's name.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use super::error;
use crate::audit;
use crate::config::AdminConfig;
use crate::metrics::Metrics;

/// The name of the token a request came with.
#[derive(Debug, Clone)]
pub(super) struct Who(pub(super) Arc<str>);

/// Lets a request through only with a configured token; the route sees
/// the token's name. A refusal is counted (`action="auth"`) and logged
/// without what was presented.
pub(super) async fn authenticate(
    tokens: Arc<AdminConfig>,
    metrics: Arc<Metrics>,
    mut req: Request,
    next: Next,
) -> Response {
    let presented = bearer(req.headers());
    match presented.and_then(|t| tokens.who(t)) {
        Some(name) => {
            req.extensions_mut().insert(Who(Arc::from(name)));
            next.run(req).await
        }
        None => {
            metrics.admin_action("auth", "unauthorized");
            tracing::warn!(
                target: audit::TARGET,
                path = req.uri().path(),
                token = if presented.is_some() { "unknown" } else { "none" },
                "admin API request refused"
            );
            let mut resp = error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Send a configured admin token: Authorization: Bearer <token>.",
            );
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer realm=\"queuegate-admin\""),
            );
            resp
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bearer_token_is_read() {
        let h = |v: &str| {
            let mut m = HeaderMap::new();
            m.insert(header::AUTHORIZATION, v.parse().unwrap());
            m
        };
        assert_eq!(bearer(&h("Bearer qga_x")), Some("qga_x"));
        assert_eq!(bearer(&h("bearer  qga_x ")), Some("qga_x"));
        assert_eq!(bearer(&h("Basic qga_x")), None);
        assert_eq!(bearer(&h("Bearer ")), None);
        assert_eq!(bearer(&h("qga_x")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }
}
