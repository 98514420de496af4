//! queuegate's edge worker: thin I/O around `queuegate-shared`.
//!
//! Every route is one Upstash REST call at most; all queue logic lives in the
//! shared crate so the worker and the scheduler cannot disagree.

use worker::{event, Context, Env, Request, Response, Result, Router};

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    Router::new()
        .get_async("/queue/health", |_req, _ctx| async move {
            Response::from_json(&serde_json::json!({ "redis": "not_configured" }))
        })
        .run(req, env)
        .await
}
