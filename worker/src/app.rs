//! The routes: enter, position, health, and the token gate in front of the
//! protected routes; everything else passes through to the origin. Each
//! queue operation is one Redis REST call.

use queuegate_shared::ops::{
    Consume, ConsumeReply, Enter, EnterReply, Observed, Outcome, Position, Settle,
};
use queuegate_shared::policy::retry_after_header_seconds;
use queuegate_shared::state::{StateReply, UserState};
use queuegate_shared::token::EntryToken;
use queuegate_shared::{QueueId, QueueKeys, Settings, UserId};
use worker::{
    Context, Date, Env, Fetch, Headers, Method, Request, RequestInit, RequestRedirect, Response,
};

use crate::config::{EdgeConfig, IdentityMode, QueueChoiceError};
use crate::error::EdgeError;
use crate::http::{self, js_err};
use crate::identity::{self, VISITOR_COOKIE};
use crate::rest::RestClient;
use crate::signing;

/// Header that carries the entry token.
pub const TOKEN_HEADER: &str = "x-entry-token";
/// Cookie that may carry the entry token instead (set on admission).
pub const TOKEN_COOKIE: &str = "qg_token";
/// Lifetime of the visitor cookie: a day covers any sale.
const VISITOR_COOKIE_MAX_AGE_S: u64 = 86_400;

/// The methods a path takes, for `Allow` (paths passed through to the
/// origin take the standard ones).
fn allowed_methods(path: &str) -> &'static str {
    match path {
        "/queue/health" | "/queue" => "GET, HEAD",
        "/queue/enter" => "POST",
        "/queue/position" => "GET",
        _ => "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
    }
}

fn not_allowed(path: &str) -> EdgeError {
    EdgeError::MethodNotAllowed {
        allow: allowed_methods(path),
    }
}

/// The worker for one request: configuration and the Redis client.
#[derive(Debug)]
pub struct App {
    config: EdgeConfig,
    redis: Option<RestClient>,
}

/// Who sent a request, and the cookie to set if we just minted them.
struct Visitor {
    user: UserId,
    new_cookie: Option<String>,
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
        Ok(App { config, redis })
    }

    /// Routes one request.
    pub async fn handle(&self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        let path = req.path();
        let method = req.method();
        // workers-rs maps a method it does not know (QUERY, TRACE…) to GET;
        // acting on that would answer or forward the wrong thing.
        if !req.inner().method().eq_ignore_ascii_case(method.as_ref()) {
            return Err(EdgeError::MethodNotAllowed {
                allow: allowed_methods(&path),
            });
        }
        match path.as_str() {
            "/queue/health" => match method {
                Method::Get | Method::Head => self.health().await,
                _ => Err(not_allowed(&path)),
            },
            "/queue/enter" => match method {
                Method::Post => self.enter(&req).await,
                _ => Err(not_allowed(&path)),
            },
            "/queue/position" => match method {
                Method::Get => self.position(&req).await,
                _ => Err(not_allowed(&path)),
            },
            "/queue" => match method {
                Method::Get | Method::Head => self.page(&req),
                _ => Err(not_allowed(&path)),
            },
            p if p.starts_with("/queue/") => Err(EdgeError::NotFound),
            p if self.config.is_protected(method.as_ref(), p) => self.gate(req, ctx).await,
            _ => self.forward(req, None).await,
        }
    }

    fn redis(&self) -> Result<&RestClient, EdgeError> {
        self.redis.as_ref().ok_or_else(|| {
            EdgeError::Misconfigured(
                "UPSTASH_REDIS_REST_URL / UPSTASH_REDIS_REST_TOKEN are not set".into(),
            )
        })
    }

    fn page(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, _) = self.queue(req)?;
        let html = crate::page::render(&self.config.page, queue.as_str());
        let resp = Response::from_html(html).map_err(js_err)?;
        let h = resp.headers();
        http::set(h, "cache-control", "no-store")?;
        http::set(
            h,
            "content-security-policy",
            crate::page::content_security_policy(),
        )?;
        http::set(h, "x-content-type-options", "nosniff")?;
        http::set(h, "referrer-policy", "no-referrer")?;
        Ok(resp)
    }

    async fn health(&self) -> Result<Response, EdgeError> {
        let Some(redis) = &self.redis else {
            return http::json(503, &serde_json::json!({ "redis": "not_configured" }));
        };
        match redis.ping().await {
            Ok(()) => http::json(200, &serde_json::json!({ "redis": "ok" })),
            Err(e) => {
                worker::console_error!("health: redis {e:?}");
                http::json(503, &serde_json::json!({ "redis": "unreachable" }))
            }
        }
    }

    /// The queue named by `?queue=`, or the default one.
    fn queue(&self, req: &Request) -> Result<(QueueId, QueueKeys), EdgeError> {
        let url = req.inner().url();
        let id = self
            .config
            .queue(http::query_param(&url, "queue"))
            .map_err(|e| match e {
                QueueChoiceError::Invalid(why) => EdgeError::InvalidQueue(why),
                QueueChoiceError::Unknown => EdgeError::UnknownQueue,
            })?
            .clone();
        let keys = QueueKeys::new(&self.config.prefix, &id);
        Ok((id, keys))
    }

    fn cookie_header(req: &Request) -> String {
        req.headers()
            .get("cookie")
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// The request's identity. `mint` lets an anonymous newcomer get one.
    fn identify(&self, req: &Request, mint: bool) -> Result<Visitor, EdgeError> {
        let cookies = Self::cookie_header(req);
        match &self.config.identity {
            IdentityMode::Anonymous { secret } => {
                match identity::cookie(&cookies, VISITOR_COOKIE) {
                    Some(value) => {
                        let user = identity::verify_visitor(secret, value)
                            .map_err(EdgeError::IdentityInvalid)?;
                        Ok(Visitor {
                            user,
                            new_cookie: None,
                        })
                    }
                    None if mint => {
                        let mut random = [0u8; 16];
                        getrandom::getrandom(&mut random)
                            .map_err(|e| EdgeError::Internal(format!("getrandom: {e}")))?;
                        let (user, value) = identity::mint_visitor(secret, random);
                        let cookie = http::cookie(
                            VISITOR_COOKIE,
                            &value,
                            VISITOR_COOKIE_MAX_AGE_S,
                            self.config.cookie_secure,
                        );
                        Ok(Visitor {
                            user,
                            new_cookie: Some(cookie),
                        })
                    }
                    None => Err(EdgeError::IdentityRequired),
                }
            }
            IdentityMode::Jwt { secret, cookie } => {
                let bearer = req
                    .headers()
                    .get("authorization")
                    .ok()
                    .flatten()
                    .and_then(|h| h.strip_prefix("Bearer ").map(str::to_string));
                let from_cookie = cookie
                    .as_deref()
                    .and_then(|name| identity::cookie(&cookies, name).map(str::to_string));
                let token = bearer.or(from_cookie).ok_or(EdgeError::IdentityRequired)?;
                let now_s = Date::now().as_millis() as f64 / 1_000.0;
                let user = identity::verify_jwt(secret, &token, now_s)
                    .map_err(EdgeError::IdentityInvalid)?;
                Ok(Visitor {
                    user,
                    new_cookie: None,
                })
            }
        }
    }

    async fn enter(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let visitor = self.identify(req, true)?;
        let reply = self
            .redis()?
            .run(&Enter {
                keys: &keys,
                user: &visitor.user,
            })
            .await?;
        match reply {
            EnterReply::Entered(observed) => self.state_reply(&queue, observed, visitor.new_cookie),
            EnterReply::Full { .. } => Err(EdgeError::QueueFull),
            EnterReply::Closed(_) => Err(EdgeError::QueueClosed),
        }
    }

    async fn position(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let visitor = self.identify(req, false)?;
        let observed = self
            .redis()?
            .run(&Position {
                keys: &keys,
                user: &visitor.user,
            })
            .await?;
        self.state_reply(&queue, observed, None)
    }

    /// 200 with the state JSON; `Retry-After` while waiting; the token as
    /// an HttpOnly cookie once admitted.
    fn state_reply(
        &self,
        queue: &QueueId,
        observed: Observed,
        visitor_cookie: Option<String>,
    ) -> Result<Response, EdgeError> {
        // Settings are published to Redis by the scheduler; the defaults
        // only fill in before a scheduler has run.
        let state = observed.into_user_state(&Settings::default().poll_policy());
        let body = serde_json::to_value(StateReply {
            state: state.clone(),
            queue: queue.to_string(),
        })
        .map_err(|e| EdgeError::Internal(e.to_string()))?;
        let resp = http::json(200, &body)?;
        let headers = resp.headers();
        if let Some(c) = visitor_cookie {
            http::append(headers, "set-cookie", &c)?;
        }
        match &state {
            UserState::Waiting { retry_after_ms, .. } => {
                http::set(
                    headers,
                    "retry-after",
                    &retry_after_header_seconds(*retry_after_ms).to_string(),
                )?;
            }
            UserState::Admitted {
                token, expires_at, ..
            } => {
                let now = Date::now().as_millis();
                let max_age = expires_at.saturating_sub(now) / 1_000;
                let c = http::cookie(
                    TOKEN_COOKIE,
                    token,
                    max_age.max(1),
                    self.config.cookie_secure,
                );
                http::append(headers, "set-cookie", &c)?;
            }
            _ => {}
        }
        Ok(resp)
    }

    /// A protected route: spend the token, forward, settle afterwards.
    async fn gate(&self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(&req)?;
        let visitor = self.identify(&req, false)?;
        let cookies = Self::cookie_header(&req);
        let presented = req
            .headers()
            .get(TOKEN_HEADER)
            .ok()
            .flatten()
            .or_else(|| identity::cookie(&cookies, TOKEN_COOKIE).map(str::to_string))
            .ok_or(EdgeError::TokenMissing)?;
        let token = EntryToken::parse(presented.trim()).ok_or(EdgeError::TokenInvalid)?;
        let redis = self.redis()?.clone();
        match redis
            .run(&Consume {
                keys: &keys,
                user: &visitor.user,
                token: &token,
            })
            .await?
        {
            ConsumeReply::Accepted => {}
            ConsumeReply::Invalid => return Err(EdgeError::TokenInvalid),
            ConsumeReply::Used => return Err(EdgeError::TokenUsed),
            ConsumeReply::Early { wait_ms } => return Err(EdgeError::NotYetActive { wait_ms }),
            ConsumeReply::Unconfigured => return Err(EdgeError::QueueClosed),
        }
        let forwarded = self.forward(req, Some((&queue, &visitor.user))).await;
        // 2xx/3xx: the order is done. 4xx/5xx or no answer: the same token
        // comes back for one retry window (see docs/edge.md).
        let outcome = match &forwarded {
            Ok(resp) if resp.status_code() < 400 => Outcome::Success,
            _ => Outcome::Failure,
        };
        let user = visitor.user;
        ctx.wait_until(async move {
            let settle = Settle {
                keys: &keys,
                user: &user,
                token: &token,
                outcome,
            };
            if let Err(e) = redis.run(&settle).await {
                worker::console_error!("settle failed: {e}");
            }
        });
        forwarded
    }

    /// Sends the request on to the origin: `ORIGIN_URL` + path, or the
    /// request's own URL on a route. Our headers and cookies are stripped;
    /// gate-passed requests get signed identity headers.
    async fn forward(
        &self,
        mut req: Request,
        passed: Option<(&QueueId, &UserId)>,
    ) -> Result<Response, EdgeError> {
        let url = req.inner().url();
        let target = match &self.config.origin {
            Some(base) => format!("{base}{}", http::path_and_query(&url)),
            None => url.clone(),
        };
        let path = req.path();
        let headers = Headers::new();
        for (name, value) in req.headers().entries() {
            let lower = name.to_ascii_lowercase();
            if lower == "host" || lower == TOKEN_HEADER || lower.starts_with("x-queuegate-") {
                continue;
            }
            if lower == "cookie" {
                let kept: Vec<&str> = value
                    .split(';')
                    .map(str::trim)
                    .filter(|c| !c.starts_with("qg_"))
                    .collect();
                if !kept.is_empty() {
                    http::set(&headers, "cookie", &kept.join("; "))?;
                }
                continue;
            }
            http::append(&headers, &name, &value)?;
        }
        let method = req.method();
        if let Some((queue, user)) = passed {
            let now = Date::now().as_millis();
            let sig = signing::sign(
                &self.config.origin_secret,
                queue.as_str(),
                user.as_str(),
                now,
                method.as_ref(),
                &path,
            );
            http::set(&headers, signing::USER_HEADER, user.as_str())?;
            http::set(&headers, signing::QUEUE_HEADER, queue.as_str())?;
            http::set(&headers, signing::TIME_HEADER, &now.to_string())?;
            http::set(&headers, signing::SIGNATURE_HEADER, &sig)?;
        }
        let mut init = RequestInit::new();
        init.with_method(method.clone())
            .with_headers(headers)
            .with_redirect(RequestRedirect::Manual);
        if !matches!(method, Method::Get | Method::Head) {
            let body = req.bytes().await.map_err(js_err)?;
            if !body.is_empty() {
                let array = worker::js_sys::Uint8Array::from(body.as_slice());
                init.with_body(Some(array.into()));
            }
        }
        let outbound = Request::new_with_init(&target, &init).map_err(js_err)?;
        Fetch::Request(outbound)
            .send()
            .await
            .map_err(|e| EdgeError::OriginUnreachable(e.to_string()))
    }
}
