//! queuegate's edge worker: thin I/O around `queuegate-shared`.
//!
//! * [`app`] — the routes (enter, position, health, the token gate).
//! * [`rest`] — the Upstash REST client over `worker::Fetch`.
//! * [`identity`] — signed visitor cookies and HS256 JWTs.
//! * [`signing`] — the signed headers the origin can verify.
//! * [`page`] — the waiting-room page.
//! * [`config`] / [`error`] / [`http`] — vars and secrets, the one error
//!   enum and its mapping to replies, reply helpers.
//!
//! Every queue operation is one Redis REST call; all queue logic lives in
//! the shared crate so the worker and the scheduler cannot disagree.

pub mod app;
pub mod config;
pub mod error;
pub mod http;
pub mod identity;
pub mod page;
pub mod rest;
pub mod signing;

use worker::{event, Context, Env, Request, Response};

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let result = match app::App::from_env(&env) {
        Ok(app) => app.handle(req, &ctx).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(resp) => Ok(resp),
        Err(e) => http::error_response(&e),
    }
}
