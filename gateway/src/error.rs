//! Every way a request can fail, and the one place that maps a failure to an
//! HTTP status and a JSON body `{"error": "..."}` (and logs 5xx causes once).

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// A request that cannot be answered with a result.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// No token, or the wrong one.
    #[error("Unauthorized")]
    Unauthorized,
    /// A path that is no command form.
    #[error("Not Found")]
    NotFound,
    /// A method the path does not take.
    #[error("Method Not Allowed")]
    MethodNotAllowed,
    /// The body is over the configured cap.
    #[error("ERR request body is larger than {limit} bytes")]
    BodyTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// The request quota (`--max-requests`) is spent: Upstash's own text.
    #[error("ERR max requests limit exceeded. Limit: {limit}, Usage: {limit}")]
    QuotaExceeded {
        /// The quota.
        limit: u64,
    },
    /// A body or path that is no valid command (bad JSON, wrong shape,
    /// a refused command).
    #[error("ERR {0}")]
    BadRequest(String),
    /// Redis answered with an error: its own text, e.g.
    /// `ERR wrong number of arguments for 'get' command`.
    #[error("{0}")]
    Redis(String),
    /// Redis cannot be reached (down, restarting, refused).
    #[error("ERR Redis is unavailable")]
    Unavailable(#[source] redis::RedisError),
    /// Redis did not answer within the configured bound.
    #[error("ERR Redis did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// A reply or failure the gateway did not expect.
    #[error("ERR internal gateway error")]
    Internal(String),
}

impl GatewayError {
    /// The HTTP status of this failure (Upstash: 400 for anything Redis or
    /// the request got wrong, 401 for auth).
    pub fn status(&self) -> StatusCode {
        match self {
            GatewayError::Unauthorized => StatusCode::UNAUTHORIZED,
            GatewayError::NotFound => StatusCode::NOT_FOUND,
            GatewayError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            GatewayError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GatewayError::BadRequest(_)
            | GatewayError::Redis(_)
            | GatewayError::QuotaExceeded { .. } => StatusCode::BAD_REQUEST,
            GatewayError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            GatewayError::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            GatewayError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Maps a redis-rs failure that is not a server reply: connection
    /// trouble is 503, anything else an internal error.
    pub fn from_redis(err: redis::RedisError) -> GatewayError {
        if err.is_io_error()
            || err.is_connection_dropped()
            || err.is_connection_refusal()
            || err.is_timeout()
        {
            GatewayError::Unavailable(err)
        } else {
            GatewayError::Internal(err.to_string())
        }
    }
}

impl IntoResponse for GatewayError {
    fn into_response(self) -> Response {
        let status = self.status();
        // The cause is logged here, once; the client sees only the summary.
        match &self {
            GatewayError::Unavailable(cause) => tracing::warn!(%cause, "redis unavailable"),
            GatewayError::Timeout(after) => tracing::warn!(?after, "redis timed out"),
            GatewayError::Internal(cause) => tracing::error!(%cause, "internal error"),
            _ => {}
        }
        let body = Json(serde_json::json!({ "error": self.to_string() }));
        (status, body).into_response()
    }
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A setting failed validation.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Redis client setup failed (not a connection failure: the gateway
    /// starts while Redis is down and connects lazily).
    #[error("cannot set up the redis client: {0}")]
    Redis(#[from] redis::RedisError),
    /// Serving failed (listener errors).
    #[error("server error: {0}")]
    Io(#[from] std::io::Error),
}
