//! `GET /queue/health`: Redis' reachability, asked at most once a second
//! per isolate ([`crate::health`] keeps the answer).

use super::App;
use crate::error::EdgeError;
use crate::health::Health;
use crate::http::{self, Response};
use crate::rest::RestError;

impl App {
    /// 200 `{"redis":"ok"}`, or 503 with why not.
    pub(super) async fn health(&self) -> Result<Response, EdgeError> {
        let Some(redis) = &self.redis else {
            return http::json(
                503,
                &Reply {
                    redis: "not_configured",
                },
            );
        };
        let health = match self.health.reuse_or_start(crate::clock::now_ms()) {
            Some(known) => known,
            None => {
                let found = match redis.ping().await {
                    Ok(()) => Health::Ok,
                    Err(RestError::Limit(why)) => {
                        worker::console_error!("health: redis plan limit reached: {why}");
                        Health::Limited
                    }
                    Err(e) => {
                        worker::console_error!("health: redis {e:?}");
                        Health::Unreachable
                    }
                };
                self.health.record(found);
                found
            }
        };
        let status = if health == Health::Ok { 200 } else { 503 };
        http::json(
            status,
            &Reply {
                redis: health.as_str(),
            },
        )
    }
}

/// `{"redis": "ok"}` and the like.
#[derive(serde::Serialize)]
struct Reply {
    redis: &'static str,
}
