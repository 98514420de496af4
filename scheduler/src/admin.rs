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
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Json, Router};
use tokio::sync::watch;

use crate::actions::{
    self, Action, ActionError, Bypass, BypassCall, Done, Notice, Reset, Revocation, RevocationCall,
    Schedule, Settings, SettingsCall, Status, Stock, Switch, SwitchState, Visitor,
};
use crate::config::{AdminConfig, Config};
use crate::connect::RedisConn;
use crate::metrics::Metrics;

mod auth;
mod body;

use auth::Who;
use body::{body, BypassBody, NoticeBody, ResetQuery, RevokeBody, ScheduleBody, StockBody};

/// The largest request body taken: a notice with a text in each of the
/// page's nine languages, each up to 280 characters of up to 4 bytes of
/// UTF-8 (JSON-escaped), fits.
pub const MAX_BODY: usize = 16 * 1024;

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
        .route(
            "/admin/v1/queues/{queue}/stock",
            get(show_stock).put(change_stock).delete(clear_stock),
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
            auth::authenticate(tokens.clone(), guard_metrics.clone(), req, next)
        }))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(Admin {
            config,
            conn,
            metrics,
        })
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
        beacon: b.beacon,
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
        beacon: None,
        names: actions::FIELDS,
    });
    answer(s.perform(&who, action).await)
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

/// Sets (`text`, with `texts` per language) or clears the notice of
/// `queue`.
fn notice(queue: String, text: Option<String>, texts: Vec<(String, String)>) -> Action {
    Action::Notice(Notice {
        queue: Some(queue),
        text,
        texts,
        input: "text",
        texts_input: "texts",
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
    answer(
        s.perform(&who, notice(queue, Some(b.text), b.texts.0))
            .await,
    )
}

async fn clear_notice(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    answer(s.perform(&who, notice(queue, None, Vec::new())).await)
}

/// A stock action on `queue`.
fn stock(queue: String, change: queuegate_shared::ops::StockChange) -> Action {
    Action::Stock(Stock {
        queue: Some(queue),
        change,
    })
}

async fn show_stock(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    let show = queuegate_shared::ops::StockChange::Show;
    answer(s.perform(&who, stock(queue, show)).await)
}

async fn change_stock(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
    bytes: Result<Bytes, BytesRejection>,
) -> Response {
    let change = match body::<StockBody>(bytes).map(StockBody::change) {
        Ok(Ok(change)) => change,
        Ok(Err(why)) => return error(StatusCode::BAD_REQUEST, "bad_request", &why),
        Err(e) => return e.into_response(),
    };
    answer(s.perform(&who, stock(queue, change)).await)
}

async fn clear_stock(
    State(s): State<Admin>,
    Extension(who): Extension<Who>,
    Path(queue): Path<String>,
) -> Response {
    let clear = queuegate_shared::ops::StockChange::Clear;
    answer(s.perform(&who, stock(queue, clear)).await)
}
