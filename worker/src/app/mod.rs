//! The worker's own routes and the token gate in front of the protected
//! ones: [`crate::routes`] says which runs, [`App::handle`] dispatches, and
//! each route lives in its own module. Each queue operation is one Redis
//! REST call.
//!
//! `enter` (join the line), `challenge` (a proof of work for a new place),
//! `position` (a poll: the snapshot or Redis), `reply` (the state reply and
//! its cookies), `gate` (spend a token, forward, settle), `bypass` (staff
//! links), `page` and `health`.

mod bypass;
mod challenge;
mod draw;
mod enter;
mod gate;
mod health;
mod page;
mod position;
mod reply;

use queuegate_edge::visit::{self, KeptForm};
use queuegate_edge::{navigation, url};
use queuegate_shared::{QueueId, QueueKeys, UserId};
use worker::worker_sys::Context;
use worker::{Env, Method};

use crate::config::{EdgeConfig, QueueChoiceError};
use crate::error::EdgeError;
use crate::health::{Health, HealthCache};
use crate::http::{self, Request, Response};
use crate::origin::{self, Forwarded};
use crate::rest::RestClient;
use crate::routes::{self, Handler, Target};
use crate::snapshots::SnapshotCache;
use crate::terms::TermsCache;
use crate::visitor::{self, Visitor};

/// The worker: configuration and the Redis client, built once per isolate.
#[derive(Debug)]
pub struct App {
    config: EdgeConfig,
    redis: Option<RestClient>,
    health: HealthCache,
    snapshots: SnapshotCache,
    terms: TermsCache,
}

impl App {
    /// Reads the configuration from vars and secrets.
    pub fn from_env(env: &Env) -> Result<App, EdgeError> {
        let config = EdgeConfig::from_lookup(|name| {
            env.secret(name)
                .map(|s| s.to_string())
                .or_else(|_| env.var(name).map(|v| v.to_string()))
                .ok()
        })
        .map_err(|e| EdgeError::Misconfigured(e.to_string()))?;
        let redis = config
            .redis
            .clone()
            .map(|r| RestClient::new(r, config.redis_timeout_ms));
        Ok(App {
            config,
            redis,
            health: HealthCache::default(),
            snapshots: SnapshotCache::default(),
            terms: TermsCache::default(),
        })
    }

    /// Routes one request. A request that found Redis down or over its
    /// plan's limit tells the health answer at once.
    pub async fn handle(&'static self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        let result = self.route(req, ctx).await;
        if let Err(e) = &result {
            self.note_health(e);
        }
        result
    }

    /// An outage a request met is the health answer at once.
    fn note_health(&self, e: &EdgeError) {
        let seen = match e {
            EdgeError::RedisUnavailable(_) | EdgeError::RedisRefused { .. } => Health::Unreachable,
            EdgeError::RedisLimited(_) => Health::Limited,
            _ => return,
        };
        self.health.saw(crate::clock::now_ms(), seen);
    }

    async fn route(&'static self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        let method = req.method();
        // workers-rs maps a method it does not know to GET: tell them apart.
        let known = req
            .inner()
            .method()
            .eq_ignore_ascii_case(method.as_ref())
            .then_some(&method);
        let target = routes::resolve(&req.path(), known, |m, p| self.config.is_protected(m, p))?;
        match target {
            Target::Queue(Handler::Health) => self.health().await,
            Target::Queue(Handler::Enter) => self.enter(req).await,
            Target::Queue(Handler::Challenge) => self.challenge(&req).await,
            Target::Queue(Handler::Position) => self.position(&req).await,
            Target::Queue(Handler::Page) => self.page(&req).await,
            Target::Queue(Handler::Bypass) => self.open_bypass(&req).await,
            Target::Queue(Handler::Draw) => self.draw_record(&req).await,
            Target::Gate => {
                // A person (a navigation or a form, Accept preferring HTML)
                // whose remedy is the queue is sent to the room with the
                // path they wanted; JSON clients keep the JSON refusal.
                let person =
                    navigation::prefers_html(req.headers().get("accept").ok().flatten().as_deref());
                let own_url = req.inner().url();
                let wanted = url::path_and_query(&own_url).to_string();
                let path = req.path();
                // A person's form POST: a copy of its body (the runtime
                // tees it), kept in case the room comes first.
                let post = method == Method::Post;
                let header = |name: &str| req.headers().get(name).ok().flatten();
                let copy = if person
                    && post
                    && visit::keeps_form(
                        header("content-type").as_deref(),
                        header("content-length").as_deref(),
                        header("sec-fetch-site").as_deref(),
                    ) {
                    req.tee()
                } else {
                    None
                };
                let accept_language = header("accept-language");
                match self.gate(req, ctx).await {
                    Err(e) if person && e.sends_to_room() => {
                        let queue = self
                            .config
                            .protecting_queue(method.as_ref(), &path)
                            .ok_or(EdgeError::NotFound)?
                            .clone();
                        if !post {
                            return http::see_other(&navigation::room_location(
                                queue.as_str(),
                                &wanted,
                            ));
                        }
                        // Never a 303: it would turn the POST into a GET of
                        // its action. A kept form is sent again from the
                        // room on Continue; any other POST's Continue leads
                        // to CONTINUE_URL.
                        let form = match copy {
                            Some(copy) if navigation::is_return_target(&wanted) => {
                                copy.text().await.ok().and_then(|body| {
                                    visit::form_fields(&body).map(|fields| KeptForm {
                                        action: wanted.clone(),
                                        fields,
                                    })
                                })
                            }
                            _ => None,
                        };
                        let back = form.as_ref().map(|f| f.action.as_str());
                        let room = self
                            .room(
                                &own_url,
                                &queue,
                                back,
                                accept_language.as_deref(),
                                form.as_ref(),
                            )
                            .await?;
                        http::set(room.headers(), "vary", "accept, accept-language");
                        Ok(room)
                    }
                    other => other,
                }
            }
            Target::Forward => self.forward(req).await,
        }
    }

    /// The REST client, or `misconfigured` without its secrets.
    pub(crate) fn redis(&self) -> Result<&RestClient, EdgeError> {
        self.redis.as_ref().ok_or_else(|| {
            EdgeError::Misconfigured(
                "UPSTASH_REDIS_REST_URL / UPSTASH_REDIS_REST_TOKEN are not set".into(),
            )
        })
    }

    /// The queue named by `?queue=`, or the default one.
    fn queue(&self, req: &Request) -> Result<(QueueId, QueueKeys), EdgeError> {
        let own_url = req.inner().url_str();
        let id = self
            .config
            .queue(url::query_param(own_url, "queue"))
            .map_err(|e| match e {
                QueueChoiceError::Invalid(why) => EdgeError::InvalidQueue(why),
                QueueChoiceError::Unknown => EdgeError::UnknownQueue,
            })?;
        let keys = QueueKeys::new(&self.config.prefix, &id);
        Ok((id, keys))
    }

    async fn identify(&self, req: &Request, mint: bool) -> Result<Visitor, EdgeError> {
        visitor::identify(&self.config.identity, self.config.cookie_secure, req, mint).await
    }

    /// Any other path: to the origin unchanged, no token needed (the
    /// stock's `Queuegate-Units` is the edge's alone: taken off).
    async fn forward(&self, req: Request) -> Result<Response, EdgeError> {
        self.send(req, None).await.reply.map(gate::without_units)
    }

    /// Forwards `req` to the origin; `passed` is who passed the gate of
    /// which queue, signed for the origin.
    async fn send(&self, req: Request, passed: Option<(&QueueId, &UserId)>) -> Forwarded {
        let config = &self.config;
        origin::forward(
            config.origin.as_deref(),
            &config.origin_secret,
            config.origin_timeout_ms,
            &req,
            passed,
        )
        .await
    }
}
