//! `/healthz` and `/metrics` (axum). Health is 200 while every queue loop
//! reached Redis recently, 503 otherwise, with a JSON body per queue.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::metrics::Metrics;

/// The router; state is the shared metrics and health.
pub fn router(metrics: Arc<Metrics>, owner: Arc<str>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .with_state(AppState { metrics, owner })
}

#[derive(Debug, Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    owner: Arc<str>,
}

async fn healthz(State(state): State<AppState>) -> Response {
    let queues = state.metrics.health();
    let healthy = queues.iter().all(|(_, ok, _)| *ok);
    let body = serde_json::json!({
        "status": if healthy { "ok" } else { "redis_unreachable" },
        "owner": &*state.owner,
        "queues": queues
            .iter()
            .map(|(q, ok, leader)| {
                (q.clone(), serde_json::json!({
                    "redis": if *ok { "ok" } else { "unreachable" },
                    "lease": if *leader { "held" } else { "standby" },
                }))
            })
            .collect::<serde_json::Map<_, _>>(),
    });
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(body)).into_response()
}

async fn metrics_text(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::Settings;
    use std::time::Duration;

    /// Drives the router without a socket.
    async fn get_path(router: Router, path: &str) -> (StatusCode, String) {
        use axum::body::Body;
        use axum::http::Request;
        use tower::ServiceExt;
        let resp = router
            .oneshot(Request::get(path).body(Body::empty()).unwrap())
            .await
            .unwrap();
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn health_follows_redis_reachability() {
        let metrics = Arc::new(Metrics::new());
        metrics.add_queue("main", &Settings::default(), Duration::from_secs(5));
        let app = || router(metrics.clone(), Arc::from("host/1/ab"));
        let (status, body) = get_path(app(), "/healthz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        metrics.redis_ok("main");
        metrics.lease("main", true);
        let (status, body) = get_path(app(), "/healthz").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(body.contains("\"lease\":\"held\""), "{body}");
    }

    #[tokio::test]
    async fn metrics_are_exposed_per_queue() {
        let metrics = Arc::new(Metrics::new());
        metrics.add_queue("main", &Settings::default(), Duration::from_secs(5));
        let counts = queuegate_shared::ops::AdmitCounts {
            admitting: true,
            admitted: 17,
            waiting: 100,
            active: 17,
            ..Default::default()
        };
        metrics.admit("main", &counts, Duration::from_millis(2), Some(175.0));
        let (status, body) = get_path(router(metrics, Arc::from("o")), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        for want in [
            "queuegate_admitted_total{queue=\"main\"} 17",
            "queuegate_waiting{queue=\"main\"} 100",
            "queuegate_active_slots{queue=\"main\"} 17",
            "queuegate_tick_duration_seconds_bucket",
            "queuegate_lease_held{queue=\"main\"} 0",
            "queuegate_admission_rate_per_second{queue=\"main\"} 175",
            "queuegate_config_max_waiting{queue=\"main\"} 10000000",
        ] {
            assert!(body.contains(want), "{want} missing from:\n{body}");
        }
        let build = format!(
            "queuegate_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(body.contains(&build), "{build} missing from:\n{body}");
    }

    /// The refusal counter follows Redis's totals while we hold the lease:
    /// a new holder starts from where the totals stand, never double counts.
    #[tokio::test]
    async fn refusals_count_what_redis_adds_while_we_hold_the_lease() {
        use queuegate_shared::ops::{AdmitCounts, Refused};
        let metrics = Arc::new(Metrics::new());
        metrics.add_queue("main", &Settings::default(), Duration::from_secs(5));
        metrics.lease("main", true);
        let tick = |budget, challenge| AdmitCounts {
            refused: Refused {
                budget,
                challenge,
                stale: challenge / 100,
                ..Refused::default()
            },
            bypassed: budget * 2,
            revoked: challenge / 10,
            ..AdmitCounts::default()
        };
        let d = Duration::from_millis(1);
        metrics.admit("main", &tick(40, 300), d, None);
        metrics.admit("main", &tick(43, 310), d, None);
        metrics.lease("main", false);
        metrics.lease("main", true);
        metrics.admit("main", &tick(50, 310), d, None);
        metrics.admit("main", &tick(51, 312), d, None);
        let (_, body) = get_path(router(metrics, Arc::from("o")), "/metrics").await;
        for want in [
            "queuegate_entries_refused_total{queue=\"main\",reason=\"budget\"} 4",
            "queuegate_entries_refused_total{queue=\"main\",reason=\"challenge\"} 12",
            "queuegate_entries_refused_total{queue=\"main\",reason=\"turnstile\"} 0",
            "queuegate_entries_refused_total{queue=\"main\",reason=\"stale\"} 0",
            "queuegate_bypassed_total{queue=\"main\"} 8",
            "queuegate_revoked_total{queue=\"main\"} 1",
        ] {
            assert!(body.contains(want), "{want} missing from:\n{body}");
        }
    }

    #[tokio::test]
    async fn a_process_that_loses_the_lease_stops_reporting_the_line() {
        let metrics = Arc::new(Metrics::new());
        metrics.add_queue("main", &Settings::default(), Duration::from_secs(5));
        metrics.lease("main", true);
        let counts = queuegate_shared::ops::AdmitCounts {
            waiting: 100,
            ..Default::default()
        };
        metrics.admit("main", &counts, Duration::from_millis(2), Some(1.0));
        metrics.lease("main", false);
        let (_, body) = get_path(router(metrics, Arc::from("o")), "/metrics").await;
        assert!(!body.contains("queuegate_waiting{"), "{body}");
        assert!(
            body.contains("queuegate_lease_held{queue=\"main\"} 0"),
            "{body}"
        );
    }
}
