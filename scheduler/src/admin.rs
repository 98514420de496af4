//! The admin API (docs/scheduler.md, *Admin API*; docs/scheduler-openapi.yaml):
//! what the operator commands do, over HTTP, on a listener of its own
//! (`[admin] listen`), only with a configured token
//! (`Authorization: Bearer …`). Each route parses its request into the
//! same [`Action`] as its command, which is recorded by [`crate::audit`]
//! under the token's name, and answers its [`Done`] as JSON; every refusal
//! is `{"error","message"}` and changed nothing.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::actions::{
    self, Action, ActionError, Bypass, BypassCall, Done, Notice, Reset, Revocation, RevocationCall,
    Schedule, Settings, SettingsCall, Status, Switch, SwitchState, Visitor,
};
use crate::audit;
use crate::config::{AdminConfig, Config};
use crate::connect::RedisConn;
use crate::metrics::Metrics;
use tokio::sync::watch;

/// The largest request body taken (a notice is at most 280 characters).
pub const MAX_BODY: usize = 4 * 1024;

/// What every route needs.
#[derive(Clone)]
struct Admin {
    /// The running config: a SIGHUP reload replaces it (new queues,
    /// their file settings).
    config: watch::Receiver<Arc<Config>>,
    conn: RedisConn,
    metrics: Arc<Metrics>,
}

impl Admin {
    fn config(&self) -> Arc<Config> {
        self.config.borrow().clone()
    }
}

/// The name of the token a request came with.
#[derive(Debug, Clone)]
struct Who(Arc<str>);

/// The admin API's router: `/admin/v1/…` behind the token check.
pub fn router(
    config: watch::Receiver<Arc<Config>>,
    admin: &AdminConfig,
    conn: RedisConn,
    metrics: Arc<Metrics>,
) -> Router {
    let tokens = Arc::new(admin.clone());
    let guard_metrics = metrics.clone();
    Router::new()
        .route("/admin/v1/queues", get(all_status))
        .route("/admin/v1/queues/{queue}", get(one_status))
        .route("/admin/v1/queues/{queue}/{switch}", post(switch))
        .route("/admin/v1/queues/{queue}/reset", post(reset))
        .route(
            "/admin/v1/queues/{queue}/settings",
            get(show_settings)
                .put(change_settings)
                .delete(clear_settings),
        )
        .route("/admin/v1/queues/{queue}/visitors/{user}", get(visitor))
        .route(
            "/admin/v1/queues/{queue}/visitors/{user}/revocation",
            put(revoke_visitor).delete(lift_visitor),
        )
        .route(
            "/admin/v1/queues/{queue}/bypasses",
            get(list_bypasses).post(create_bypass),
        )
        .route(
            "/admin/v1/queues/{queue}/bypasses/{id}",
            axum::routing::delete(revoke_bypass),
        )
        .route(
            "/admin/v1/queues/{queue}/schedule",
            put(set_schedule).delete(clear_schedule),
        )
        .route(
            "/admin/v1/queues/{queue}/notice",
            put(set_notice).delete(clear_notice),
        )
        .fallback(|| async { error(StatusCode::NOT_FOUND, "not_found", "No such route.") })
        .method_not_allowed_fallback(|| async {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "This route does not take that method.",
            )
        })
        .layer(middleware::from_fn(move |req, next| {
            authenticate(tokens.clone(), guard_metrics.clone(), req, next)
        }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Admin {
            config,
            conn,
            metrics,
        })
}

/// Lets a request through only with a configured token; the route sees
/// the token's name. A refusal is counted (`action="auth"`) and logged
/// without what was presented.
async fn authenticate(
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

/// `{"error": code, "message": message}` with `status`.
fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": code, "message": message });
    (status, Json(body)).into_response()
}

impl IntoResponse for ActionError {
    fn into_response(self) -> Response {
        match &self {
            ActionError::BadInput(m) => error(StatusCode::BAD_REQUEST, "bad_request", m),
            ActionError::UnknownQueue(m) => error(StatusCode::NOT_FOUND, "unknown_queue", m),
            ActionError::UnknownBypass(m) => error(StatusCode::NOT_FOUND, "unknown_bypass", m),
            ActionError::Refused(m) => error(StatusCode::CONFLICT, "refused", m),
            ActionError::Conflict(m) => error(StatusCode::CONFLICT, "conflict", m),
            ActionError::Redis(e) => {
                tracing::error!(error = %e, "admin API: redis");
                error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "Redis could not be asked; nothing was changed. Try again.",
                )
            }
        }
    }
}

impl Admin {
    /// Performs `action`, recorded under the token's name and counted.
    async fn perform(&self, who: &Who, action: Action) -> Result<Done, ActionError> {
        let mut conn = self.conn.clone();
        action
            .perform(&self.config(), &mut conn, &who.0, Some(&self.metrics))
            .await
    }
}

/// An action's outcome as JSON: lists inside an object, a new link
/// `201 Created`, every refusal `{"error","message"}`.
fn answer(done: Result<Done, ActionError>) -> Response {
    match done {
        Ok(Done::Status(queues)) => Json(serde_json::json!({ "queues": queues })).into_response(),
        Ok(Done::Bypasses(all)) => Json(serde_json::json!({ "bypasses": all })).into_response(),
        Ok(created @ Done::BypassCreated(_)) => {
            (StatusCode::CREATED, Json(created)).into_response()
        }
        Ok(done) => Json(done).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Why a request body was not taken.
#[derive(Debug)]
struct BodyError(StatusCode, &'static str, String);

impl IntoResponse for BodyError {
    fn into_response(self) -> Response {
        error(self.0, self.1, &self.2)
    }
}

/// A JSON body of `T` (unknown fields refused), or a 400/413 saying why.
fn body<T: DeserializeOwned>(bytes: Result<Bytes, BytesRejection>) -> Result<T, BodyError> {
    let bytes = bytes.map_err(|e| {
        BodyError(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("The body is over {MAX_BODY} bytes or unreadable: {e}"),
        )
    })?;
    let bad = |e: String| {
        BodyError(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("The body is not the JSON this route takes: {e}"),
        )
    };
    // An object, not an array serde would read into the struct by position.
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v @ serde_json::Value::Object(_)) => T::deserialize(v).map_err(|e| bad(e.to_string())),
        Ok(_) => Err(bad("a JSON object is expected".into())),
        Err(e) => Err(bad(e.to_string())),
    }
}

async fn all_status(State(s): State<Admin>, Extension(who): Extension<Who>) -> Response {
    answer(
        s.perform(&who, Action::Status(Status { queue: None }))
            .await,
    )
}

async fn one_status(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    let queue = Some(queue);
    match s.perform(&who, Action::Status(Status { queue })).await {
        Ok(Done::Status(mut one)) if one.len() == 1 => Json(one.remove(0)).into_response(),
        other => answer(other),
    }
}

async fn switch(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path((queue, name)): Path<(String, String)>,
) -> Response {
    let Some((_, switch)) = Switch::ALL.iter().find(|(n, _)| *n == name) else {
        return error(StatusCode::NOT_FOUND, "not_found", "No such route.");
    };
    let action = Action::Switch(SwitchState {
        queue: Some(queue),
        switch: *switch,
    });
    answer(s.perform(&who, action).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleBody {
    #[serde(default, deserialize_with = "present")]
    opens_at: Option<String>,
    #[serde(default, deserialize_with = "present")]
    closes_at: Option<String>,
}

/// A field that may be left out but, when given, is a string: `null` is
/// refused rather than read as "left out" (DELETE clears).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

async fn set_schedule(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Response {
    let b: ScheduleBody = match body(bytes) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let action = Action::Schedule(Schedule {
        queue: Some(queue),
        opens_at: b.opens_at,
        closes_at: b.closes_at,
        clear: false,
        names: actions::FIELDS,
    });
    answer(s.perform(&who, action).await)
}

async fn clear_schedule(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    let action = Action::Schedule(Schedule {
        queue: Some(queue),
        opens_at: None,
        closes_at: None,
        clear: true,
        names: actions::FIELDS,
    });
    answer(s.perform(&who, action).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BypassBody {
    name: String,
    #[serde(default = "default_minutes", deserialize_with = "whole_number")]
    ttl_minutes: u64,
}

/// A non-negative whole number, written `30` or `30.0` (JSON Schema counts
/// both as integers); anything else is a 400.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let n = serde_json::Number::deserialize(d)?;
    n.as_u64()
        .or_else(|| {
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && (0.0..=u32::MAX as f64).contains(f))
                .map(|f| f as u64)
        })
        .ok_or_else(|| serde::de::Error::custom("must be a whole number of minutes"))
}

fn default_minutes() -> u64 {
    120
}

/// `bypass` on `queue`.
fn bypass(queue: String, call: BypassCall) -> Action {
    Action::Bypass(Bypass {
        queue: Some(queue),
        call,
    })
}

async fn create_bypass(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Response {
    let b: BypassBody = match body(bytes) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    let call = BypassCall::Create {
        name: b.name,
        ttl_minutes: b.ttl_minutes,
    };
    answer(s.perform(&who, bypass(queue, call)).await)
}

async fn list_bypasses(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    answer(s.perform(&who, bypass(queue, BypassCall::List)).await)
}

async fn revoke_bypass(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path((queue, id)): Path<(String, String)>,
) -> Response {
    answer(
        s.perform(&who, bypass(queue, BypassCall::Revoke { id }))
            .await,
    )
}

async fn visitor(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path((queue, user)): Path<(String, String)>,
) -> Response {
    let action = Action::Visitor(Visitor {
        queue: Some(queue),
        user,
    });
    answer(s.perform(&who, action).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RevokeBody {
    #[serde(default, deserialize_with = "some_whole_number")]
    minutes: Option<u64>,
}

fn some_whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    whole_number(d).map(Some)
}

/// `call` on the visitor `user` of `queue`.
fn revocation(queue: String, user: String, call: RevocationCall) -> Action {
    Action::Revocation(Revocation {
        queue: Some(queue),
        user,
        call,
    })
}

async fn revoke_visitor(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path((queue, user)): Path<(String, String)>,
    bytes: Result<Bytes, BytesRejection>,
) -> Response {
    // No body, or an empty one: the default time.
    let b: RevokeBody = match &bytes {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => RevokeBody::default(),
        _ => match body(bytes) {
            Ok(b) => b,
            Err(e) => return e.into_response(),
        },
    };
    let call = RevocationCall::Revoke { minutes: b.minutes };
    answer(s.perform(&who, revocation(queue, user, call)).await)
}

async fn lift_visitor(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path((queue, user)): Path<(String, String)>,
) -> Response {
    let action = revocation(queue, user, RevocationCall::Lift);
    answer(s.perform(&who, action).await)
}

/// `call` on the settings of `queue`.
fn settings(queue: String, call: SettingsCall) -> Action {
    Action::Settings(Settings {
        queue: Some(queue),
        call,
    })
}

async fn show_settings(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    answer(s.perform(&who, settings(queue, SettingsCall::Show)).await)
}

async fn change_settings(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Response {
    let changes: crate::runtime::Values = match body(bytes) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    answer(
        s.perform(&who, settings(queue, SettingsCall::Change(changes)))
            .await,
    )
}

async fn clear_settings(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    answer(s.perform(&who, settings(queue, SettingsCall::Clear)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResetQuery {
    #[serde(default)]
    force: bool,
}

async fn reset(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
    query: Result<Query<ResetQuery>, QueryRejection>,
) -> Response {
    let Ok(Query(q)) = query else {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "The query takes only force=true or force=false.",
        );
    };
    let action = Action::Reset(Reset {
        queue: Some(queue),
        force: q.force,
    });
    answer(s.perform(&who, action).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoticeBody {
    text: String,
}

/// Sets (`text`) or clears the notice of `queue`.
fn notice(queue: String, text: Option<String>) -> Action {
    Action::Notice(Notice {
        queue: Some(queue),
        text,
        input: "notice",
    })
}

async fn set_notice(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Response {
    let b: NoticeBody = match body(bytes) {
        Ok(b) => b,
        Err(e) => return e.into_response(),
    };
    answer(s.perform(&who, notice(queue, Some(b.text))).await)
}

async fn clear_notice(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    answer(s.perform(&who, notice(queue, None)).await)
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
