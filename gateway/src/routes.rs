//! The HTTP surface: the four command forms, the token guard in front of
//! everything (404 and 405 included, so an unauthenticated caller learns
//! nothing), and JSON for every answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use serde_json::Value as JsonValue;

use crate::auth::Token;
use crate::backend::{Backend, Transaction};
use crate::config::ReplyDelay;
use crate::error::GatewayError;
use crate::protocol::{self, policy, Command, Encoding, Outcome};
use crate::stats::{Stats, STATS_PATH};

/// The response header @upstash/redis reads for `readYourWrites` and sends
/// back on its next request. One Redis has no replicas to wait for, so the
/// value is only an increasing counter and the request header is ignored.
pub const SYNC_TOKEN_HEADER: &str = "upstash-sync-token";

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    backend: Backend,
    token: Token,
    max_body_bytes: usize,
    sync_counter: Arc<AtomicU64>,
    stats: Stats,
    /// Requests the quota still allows (None: no quota).
    quota: Option<Arc<Quota>>,
    /// Tests only: script replies to hold back, and how many are left.
    delay: Option<Arc<(ReplyDelay, AtomicU64)>>,
}

/// An Upstash-like request quota: `limit` requests, then refusals.
#[derive(Debug)]
struct Quota {
    limit: u64,
    used: AtomicU64,
}

impl Quota {
    /// Counts one request; false once the limit was reached before it.
    fn spend(&self) -> bool {
        self.used.fetch_add(1, Ordering::Relaxed) < self.limit
    }
}

impl AppState {
    /// State for [`router`].
    pub fn new(backend: Backend, token: &str, max_body_bytes: usize) -> AppState {
        AppState {
            backend,
            token: Token::new(token),
            max_body_bytes,
            sync_counter: Arc::new(AtomicU64::new(0)),
            stats: Stats::default(),
            quota: None,
            delay: None,
        }
    }

    /// Tests only: holds the replies [`ReplyDelay`] names.
    pub fn with_reply_delay(mut self, delay: Option<ReplyDelay>) -> AppState {
        self.delay = delay.map(|d| {
            let left = AtomicU64::new(d.count);
            Arc::new((d, left))
        });
        self
    }

    /// Whether this command's reply is one to hold (spending one).
    fn held(&self, command: &Command) -> Option<std::time::Duration> {
        let (delay, left) = self.delay.as_deref()?;
        let matches = command.name() == "EVALSHA"
            && command
                .args()
                .first()?
                .eq_ignore_ascii_case(delay.sha1.as_bytes());
        (matches
            && left
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok())
        .then_some(delay.delay)
    }

    /// Refuses every request after the first `max_requests` (0: never), as
    /// an Upstash database whose plan's quota ran out does.
    pub fn with_quota(mut self, max_requests: u64) -> AppState {
        self.quota = (max_requests > 0).then(|| {
            Arc::new(Quota {
                limit: max_requests,
                used: AtomicU64::new(0),
            })
        });
        self
    }
}

/// The gateway's routes with the guard and the body cap applied.
pub fn router(state: AppState) -> Router {
    let limit = state.max_body_bytes;
    Router::new()
        .route("/", post(single))
        .route("/pipeline", post(pipeline))
        .route("/multi-exec", post(multi_exec))
        .route(STATS_PATH, get(stats))
        .route("/pipeline/{*rest}", any(not_found))
        .route("/multi-exec/{*rest}", any(not_found))
        .route("/{*command}", get(path_form).post(path_form).put(path_form))
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Token check, the sync-token header and one log line per request. Only
/// the method, the first path segment and the status are logged: tokens
/// and values never are.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let label = log_label(request.uri().path()).to_string();
    let mut response = match state.token.check(request.headers(), request.uri()) {
        Ok(()) => {
            let counted = request.uri().path() != STATS_PATH;
            if counted {
                state.stats.request();
            }
            match &state.quota {
                Some(q) if counted && !q.spend() => {
                    GatewayError::QuotaExceeded { limit: q.limit }.into_response()
                }
                _ => next.run(request).await,
            }
        }
        Err(denied) => denied.into_response(),
    };
    let sync = state.sync_counter.fetch_add(1, Ordering::Relaxed) + 1;
    response
        .headers_mut()
        .insert(SYNC_TOKEN_HEADER, HeaderValue::from(sync));
    tracing::debug!(
        %method,
        path = %label,
        status = response.status().as_u16(),
        micros = started.elapsed().as_micros() as u64,
        "request"
    );
    response
}

/// `POST /` with `["CMD", "arg", …]`.
async fn single(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, GatewayError> {
    let body = read_body(body, state.max_body_bytes)?;
    let command = protocol::parse_command(&body)?;
    run_single(&state, &command, Encoding::from_headers(&headers)).await
}

/// `GET|POST|PUT /CMD/arg/…[?name=value]`, a raw body as the last value.
async fn path_form(
    State(state): State<AppState>,
    headers: HeaderMap,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, GatewayError> {
    let body = read_body(body, state.max_body_bytes)?;
    let command = match protocol::parse_path(uri.path(), uri.query(), &body) {
        Ok(command) => command,
        // `//x` and the like name no command: no such resource.
        Err(GatewayError::BadRequest(_)) => return Err(GatewayError::NotFound),
        Err(other) => return Err(other),
    };
    run_single(&state, &command, Encoding::from_headers(&headers)).await
}

async fn run_single(
    state: &AppState,
    command: &Command,
    encoding: Encoding,
) -> Result<Response, GatewayError> {
    if let Some(why) = policy::refusal(command) {
        return Err(GatewayError::BadRequest(why));
    }
    state.stats.round_trip([command]);
    let reply = state.backend.command(command).await?;
    if let Some(delay) = state.held(command) {
        // Redis ran it; the client hears of it late, or never.
        tokio::time::sleep(delay).await;
    }
    match Outcome::from_reply(reply, encoding) {
        Outcome::Error(text) => Err(GatewayError::Redis(text)),
        ok => Ok(Json(ok.into_json()).into_response()),
    }
}

/// `POST /pipeline`: in order, not atomic, one outcome per command, 200
/// even when some fail (a refused command fails alone; the rest still run).
async fn pipeline(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, GatewayError> {
    let body = read_body(body, state.max_body_bytes)?;
    let encoding = Encoding::from_headers(&headers);
    let commands = protocol::parse_batch(&body)?;
    let refusals: Vec<Option<String>> = commands.iter().map(policy::refusal).collect();
    let runnable: Vec<Command> = commands
        .into_iter()
        .zip(&refusals)
        .filter(|(_, refused)| refused.is_none())
        .map(|(c, _)| c)
        .collect();
    let mut replies = if runnable.is_empty() {
        Vec::new()
    } else {
        state.stats.round_trip(&runnable);
        state.backend.pipeline(&runnable).await?
    }
    .into_iter();
    let outcomes = refusals
        .into_iter()
        .map(|refused| match refused {
            Some(why) => Outcome::Error(GatewayError::BadRequest(why).to_string()),
            None => Outcome::from_reply(replies.next().unwrap_or_default(), encoding),
        })
        .map(Outcome::into_json)
        .collect::<Vec<JsonValue>>();
    Ok(Json(JsonValue::Array(outcomes)).into_response())
}

/// `POST /multi-exec`: MULTI … EXEC. A transaction Redis discards as a
/// whole (EXECABORT) is one error with 400; otherwise one outcome per
/// command, runtime errors included, as Redis runs them.
async fn multi_exec(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, GatewayError> {
    let body = read_body(body, state.max_body_bytes)?;
    let encoding = Encoding::from_headers(&headers);
    let commands = protocol::parse_batch(&body)?;
    if let Some(why) = commands.iter().find_map(policy::refusal) {
        return Err(GatewayError::BadRequest(why));
    }
    state.stats.round_trip(&commands);
    match state.backend.transaction(&commands).await? {
        Transaction::Ran(replies) => {
            let outcomes = replies
                .into_iter()
                .map(|reply| Outcome::from_reply(reply, encoding).into_json())
                .collect::<Vec<_>>();
            Ok(Json(JsonValue::Array(outcomes)).into_response())
        }
        Transaction::Rejected(reply) => match Outcome::from_reply(reply, encoding) {
            Outcome::Error(text) => Err(GatewayError::Redis(text)),
            Outcome::Result(_) => Err(GatewayError::Internal("transaction rejected".into())),
        },
    }
}

/// `GET /_stats`: the request and round-trip counters (see [`Stats`]).
async fn stats(State(state): State<AppState>) -> Json<JsonValue> {
    Json(state.stats.snapshot())
}

async fn not_found() -> GatewayError {
    GatewayError::NotFound
}

async fn method_not_allowed() -> GatewayError {
    GatewayError::MethodNotAllowed
}

fn read_body(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, GatewayError> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            GatewayError::BodyTooLarge { limit }
        } else {
            GatewayError::BadRequest(format!("cannot read the body: {}", rejection.body_text()))
        }
    })
}

/// The first path segment if it looks like a command or route name; the
/// rest of the path holds values and is never logged.
fn log_label(path: &str) -> &str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    let plain = first.len() <= 32
        && first
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    match (first.is_empty(), plain) {
        (true, _) => "/",
        (false, true) => first,
        (false, false) => "?",
    }
}

#[cfg(test)]
mod tests;
