//! The worker's configuration from `[vars]` and secrets, parsed apart from
//! the Workers `Env` so every rule is testable on the host.

mod guard;
mod page;
mod routes;

pub use guard::{GuardConfig, TurnstileConfig};
pub use page::{PageConfig, Texts};
use queuegate_edge::identity::Key;
use queuegate_edge::visit::match_path;
pub use queuegate_shared::ops::RouteKind;
use queuegate_shared::{Prefix, QueueId};
pub use routes::RouteRule;

/// A configuration problem: which variable, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}: {why}")]
pub struct ConfigError {
    /// The variable or secret.
    pub name: &'static str,
    /// What is wrong with it.
    pub why: String,
}

pub(crate) fn err(name: &'static str, why: impl Into<String>) -> ConfigError {
    ConfigError {
        name,
        why: why.into(),
    }
}

/// Var `name` as `get` finds it, trimmed; None when unset or blank (a
/// blank var means "the default", as in `wrangler.toml`'s examples).
pub(crate) fn var(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    get(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// [`var`], or `default` when unset or blank.
pub(crate) fn var_or(get: &impl Fn(&str) -> Option<String>, name: &str, default: &str) -> String {
    var(get, name).unwrap_or_else(|| default.to_string())
}

/// A duration in ms from `name`'s text, within `range`.
pub(crate) fn millis(
    name: &'static str,
    text: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    text.parse::<u64>()
        .ok()
        .filter(|ms| range.contains(ms))
        .ok_or_else(|| {
            err(
                name,
                format!(
                    "must be a number of ms from {} to {}",
                    range.start(),
                    range.end()
                ),
            )
        })
}

/// How visitors are identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityMode {
    /// A random visitor id in an HMAC-signed cookie minted by the worker.
    Anonymous {
        /// HMAC key of the visitor cookie.
        secret: Key,
    },
    /// The shop's JWT; the user id is its `sub`. HS256 with `JWT_SECRET`,
    /// or RS256/ES256 with the keys the login service publishes at
    /// `JWKS_URL` (never both: a public key must never be taken as an
    /// HMAC secret).
    Jwt {
        /// HMAC key of HS256 JWTs (`JWT_SECRET`); with a JWKS, the key of
        /// place cookies only (`IDENTITY_SECRET`).
        secret: Key,
        /// Cookie that may carry the JWT instead of `Authorization: Bearer`.
        cookie: Option<String>,
        /// `JWKS_URL`: RS256 and ES256 tokens verified with its keys.
        jwks: Option<String>,
        /// `JWT_AUDIENCE`: the `aud` a token must have, if set.
        audience: Option<String>,
        /// `JWT_ISSUER`: the `iss` a token must have, if set.
        issuer: Option<String>,
    },
}

impl IdentityMode {
    /// The claims a JWT must carry besides `exp`, `nbf` and `sub`.
    pub fn expect(&self) -> queuegate_edge::identity::Expect<'_> {
        match self {
            IdentityMode::Jwt {
                audience, issuer, ..
            } => queuegate_edge::identity::Expect {
                audience: audience.as_deref(),
                issuer: issuer.as_deref(),
            },
            IdentityMode::Anonymous { .. } => queuegate_edge::identity::Expect::default(),
        }
    }
}

/// `JWKS_URL`: https, or a loopback http stand-in (tests, `wrangler dev`).
fn jwks_url(url: String) -> Result<String, ConfigError> {
    let loopback = ["http://127.0.0.1:", "http://localhost:", "http://[::1]:"];
    if url.starts_with("https://") || loopback.iter().any(|p| url.starts_with(p)) {
        Ok(url)
    } else {
        Err(err(
            "JWKS_URL",
            "must be an https:// URL (the login service's published keys)",
        ))
    }
}

/// Whether `url` is a key set shared by every tenant of a service (every
/// Firebase project, every app signing in with Google, Apple or a
/// Microsoft account): a token it verifies says who signed it in, not for
/// whom, so the audience must be set.
fn shared_key_set(url: &str) -> bool {
    const SHARED: [&str; 6] = [
        "https://www.googleapis.com/",
        "https://securetoken.google.com/",
        "https://appleid.apple.com/",
        "https://login.microsoftonline.com/common/",
        "https://login.microsoftonline.com/consumers/",
        "https://login.microsoftonline.com/organizations/",
    ];
    SHARED.iter().any(|p| url.starts_with(p))
}

/// Upstash REST endpoint and token.
#[derive(Clone, PartialEq, Eq)]
pub struct RedisRest {
    /// e.g. `https://eu1-….upstash.io` or the local gateway.
    pub url: String,
    /// Bearer token (secret).
    pub token: String,
}

impl std::fmt::Debug for RedisRest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRest")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Everything the worker needs.
#[derive(Clone, PartialEq, Eq)]
pub struct EdgeConfig {
    /// The queue used when a request names none.
    pub default_queue: QueueId,
    /// The queues the edge accepts (`?queue=`) by name.
    pub queues: Vec<QueueId>,
    /// And by pattern: every id starting with one of these (`QUEUES`
    /// entries `drop-*`; `*` alone: any id), so a queue added to the
    /// schedulers needs no redeploy of the worker.
    pub queue_prefixes: Vec<String>,
    /// Redis key prefix.
    pub prefix: Prefix,
    /// The origin base URL; None forwards to the request's own URL (the
    /// worker deployed on a route in front of the origin).
    pub origin: Option<String>,
    /// Identity mode and its secret.
    pub identity: IdentityMode,
    /// Routes that need an entry token.
    pub protected: Vec<RouteRule>,
    /// HMAC key of the headers forwarded to the origin.
    pub origin_secret: Vec<u8>,
    /// Redis over REST; None until the secrets are set (health says so).
    pub redis: Option<RedisRest>,
    /// Timeout of one Redis REST call.
    pub redis_timeout_ms: u64,
    /// Time the origin has for its whole reply to a forwarded request.
    pub origin_timeout_ms: u64,
    /// Whether cookies carry `Secure` (turn off only for plain-http dev).
    pub cookie_secure: bool,
    /// The waiting-room page's operator settings.
    pub page: PageConfig,
    /// What a new place must pass at the edge.
    pub guard: GuardConfig,
}

impl std::fmt::Debug for EdgeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets stay out of logs.
        f.debug_struct("EdgeConfig")
            .field("default_queue", &self.default_queue)
            .field("queues", &self.queues)
            .field("queue_prefixes", &self.queue_prefixes)
            .field("origin", &self.origin)
            .field("protected", &self.protected)
            .field("redis", &self.redis)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

/// Shortest accepted HMAC secret, in bytes.
pub const MIN_SECRET_LEN: usize = 32;

fn secret(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Vec<u8>, ConfigError> {
    let value = get(name).filter(|v| !v.is_empty()).ok_or_else(|| {
        err(
            name,
            "is not set: `npx wrangler secret put` it (locally: .dev.vars)",
        )
    })?;
    if value.len() < MIN_SECRET_LEN {
        return Err(err(
            name,
            format!("must be at least {MIN_SECRET_LEN} bytes"),
        ));
    }
    Ok(value.into_bytes())
}

impl EdgeConfig {
    /// Reads the configuration through `get` (vars and secrets by name).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<EdgeConfig, ConfigError> {
        let text = |name: &str, default: &str| var_or(&get, name, default);
        let default_queue =
            QueueId::new(&text("QUEUE_ID", "main")).map_err(|e| err("QUEUE_ID", e.to_string()))?;
        let mut queues = Vec::new();
        let mut queue_prefixes = Vec::new();
        for id in text("QUEUES", default_queue.as_str()).split(',') {
            let id = id.trim();
            if let Some(prefix) = id.strip_suffix('*') {
                // A pattern: its prefix must be the start of a valid id.
                if !prefix.is_empty() {
                    QueueId::new(prefix).map_err(|e| {
                        err(
                            "QUEUES",
                            format!("{id}: {e} (a pattern is a prefix then *)"),
                        )
                    })?;
                }
                queue_prefixes.push(prefix.to_string());
                continue;
            }
            queues.push(QueueId::new(id).map_err(|e| err("QUEUES", e.to_string()))?);
        }
        if !queues.contains(&default_queue) {
            return Err(err(
                "QUEUES",
                format!("must include QUEUE_ID {default_queue}"),
            ));
        }
        let prefix = Prefix::new(&text("KEY_PREFIX", queuegate_shared::keys::DEFAULT_PREFIX))
            .map_err(|e| err("KEY_PREFIX", e.to_string()))?;
        let origin = get("ORIGIN_URL")
            .map(|v| v.trim().trim_end_matches('/').to_string())
            .filter(|v| !v.is_empty());
        if let Some(o) = &origin {
            if !(o.starts_with("http://") || o.starts_with("https://")) {
                return Err(err("ORIGIN_URL", "must start with http:// or https://"));
            }
        }
        let identity = match text("IDENTITY_MODE", "anonymous").as_str() {
            "anonymous" => IdentityMode::Anonymous {
                secret: Key::new(&secret(&get, "IDENTITY_SECRET")?),
            },
            "jwt" => {
                let some = |name: &str| get(name).filter(|v| !v.trim().is_empty());
                let jwks = match (some("JWKS_URL"), some("JWT_SECRET")) {
                    (Some(_), Some(_)) => {
                        return Err(err(
                            "JWKS_URL",
                            "set JWT_SECRET (HS256) or JWKS_URL (RS256/ES256), not both",
                        ))
                    }
                    (Some(url), None) => Some(jwks_url(url)?),
                    (None, _) => None,
                };
                if let Some(url) = &jwks {
                    // A key set may sign for more than this shop: the
                    // issuer says which service, the audience which project.
                    if some("JWT_ISSUER").is_none() {
                        return Err(err(
                            "JWT_ISSUER",
                            "required with JWKS_URL: the `iss` your login service writes \
                             (its keys may sign tokens for other services too)",
                        ));
                    }
                    if shared_key_set(url) && some("JWT_AUDIENCE").is_none() {
                        return Err(err(
                            "JWT_AUDIENCE",
                            "required with this JWKS_URL: its keys sign tokens for every \
                             project and app of the service; set yours (Firebase: the \
                             project id; Google, Apple, Microsoft: your client id)",
                        ));
                    }
                }
                IdentityMode::Jwt {
                    // With a JWKS there is no shared secret: place cookies
                    // are signed with IDENTITY_SECRET.
                    secret: Key::new(&secret(
                        &get,
                        if jwks.is_some() {
                            "IDENTITY_SECRET"
                        } else {
                            "JWT_SECRET"
                        },
                    )?),
                    cookie: get("JWT_COOKIE").filter(|c| !c.is_empty()),
                    jwks,
                    audience: some("JWT_AUDIENCE"),
                    issuer: some("JWT_ISSUER"),
                }
            }
            other => {
                return Err(err(
                    "IDENTITY_MODE",
                    format!("{other:?}: use \"anonymous\" or \"jwt\""),
                ))
            }
        };
        let protected = text("PROTECTED_ROUTES", "POST /orders")
            .split(',')
            .filter(|r| !r.trim().is_empty())
            .map(RouteRule::parse)
            .collect::<Result<Vec<_>, _>>()?;
        for (i, rule) in protected.iter().enumerate() {
            if let Some(both) = protected[i + 1..]
                .iter()
                .find_map(|o| rule.clash(o).map(|request| (o.describe(), request)))
            {
                return Err(err(
                    "PROTECTED_ROUTES",
                    format!(
                        "`{}` and `{}` both match {}: make them one kind and one queue, or split their paths",
                        rule.describe(),
                        both.0,
                        both.1
                    ),
                ));
            }
            let listed = |q: &QueueId| {
                queues.contains(q)
                    || queue_prefixes
                        .iter()
                        .any(|p| q.as_str().starts_with(p.as_str()))
            };
            if let Some(q) = rule.queue.as_ref().filter(|q| !listed(q)) {
                return Err(err(
                    "PROTECTED_ROUTES",
                    format!(
                        "{} {} names queue {q}, which is not in QUEUES",
                        rule.method, rule.path
                    ),
                ));
            }
        }
        let redis = match (
            get("UPSTASH_REDIS_REST_URL"),
            get("UPSTASH_REDIS_REST_TOKEN"),
        ) {
            (Some(url), Some(token)) if !url.is_empty() && !token.is_empty() => Some(RedisRest {
                url: url.trim_end_matches('/').to_string(),
                token,
            }),
            _ => None,
        };
        let redis_timeout_ms = millis(
            "REDIS_TIMEOUT_MS",
            &text("REDIS_TIMEOUT_MS", "2000"),
            50..=30_000,
        )?;
        let origin_timeout_ms = millis(
            "ORIGIN_TIMEOUT_MS",
            &text("ORIGIN_TIMEOUT_MS", "10000"),
            100..=120_000,
        )?;
        let cookie_secure = match text("COOKIE_SECURE", "true").as_str() {
            "true" => true,
            "false" => false,
            _ => return Err(err("COOKIE_SECURE", "must be true or false")),
        };
        let origin_secret = secret(&get, "ORIGIN_SIGNING_SECRET")?;
        Ok(EdgeConfig {
            guard: GuardConfig::from_lookup(&get, &identity, &origin_secret)?,
            default_queue,
            queues,
            queue_prefixes,
            prefix,
            origin,
            identity,
            protected,
            origin_secret,
            redis,
            redis_timeout_ms,
            origin_timeout_ms,
            cookie_secure,
            page: PageConfig::from_lookup(&get)?,
        })
    }

    /// Resolves `?queue=`: the default when absent.
    pub fn queue(&self, requested: Option<&str>) -> Result<QueueId, QueueChoiceError> {
        let Some(text) = requested else {
            return Ok(self.default_queue.clone());
        };
        let id = QueueId::new(text).map_err(|e| QueueChoiceError::Invalid(e.to_string()))?;
        let by_pattern = || {
            self.queue_prefixes
                .iter()
                .any(|p| id.as_str().starts_with(p.as_str()))
        };
        if self.queues.contains(&id) || by_pattern() {
            Ok(id)
        } else {
            Err(QueueChoiceError::Unknown)
        }
    }

    /// True when `method path` (as requested: it is normalised here) is
    /// behind the gate. A path too long to normalise is, so the gate
    /// refuses it.
    pub fn is_protected(&self, method: &str, path: &str) -> bool {
        self.protection(method, path).is_some()
    }

    /// The queue that guards `method path` (the first rule that matches;
    /// `QUEUE_ID` for a rule that names none), if it is protected.
    pub fn protecting_queue(&self, method: &str, path: &str) -> Option<&QueueId> {
        self.protection(method, path).map(|(queue, _)| queue)
    }

    /// The queue and the route kind that guard `method path`, if any.
    pub fn protection(&self, method: &str, path: &str) -> Option<(&QueueId, RouteKind)> {
        if self.protected.is_empty() {
            return None;
        }
        let Some(path) = match_path(path) else {
            // Too long to normalise: the first rule's queue, spending,
            // so the gate refuses it rather than let it through.
            let first = &self.protected[0];
            return Some((
                first.queue.as_ref().unwrap_or(&self.default_queue),
                RouteKind::Spend,
            ));
        };
        let rule = self.protected.iter().find(|r| r.matches(method, &path))?;
        Some((
            rule.queue.as_ref().unwrap_or(&self.default_queue),
            rule.kind_for(method),
        ))
    }
}

/// Why `?queue=` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueChoiceError {
    /// Not a valid queue id.
    Invalid(String),
    /// Valid, but not one of ours.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const S: &str = "0123456789abcdef0123456789abcdef";

    fn config(pairs: &[(&str, &str)]) -> Result<EdgeConfig, ConfigError> {
        let mut map: HashMap<String, String> =
            [("IDENTITY_SECRET", S), ("ORIGIN_SIGNING_SECRET", S)]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        for (k, v) in pairs {
            map.insert(k.to_string(), v.to_string());
        }
        EdgeConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_need_only_the_secrets() {
        let c = config(&[]).unwrap();
        assert_eq!(c.default_queue.as_str(), "main");
        assert!(c.is_protected("POST", "/orders"));
        assert!(!c.is_protected("GET", "/orders"));
        assert!(c.redis.is_none());
        assert!(c.cookie_secure);
    }

    #[test]
    fn queue_choice_is_checked_against_the_allow_list() {
        let c = config(&[("QUEUES", "main, drop-2")]).unwrap();
        assert_eq!(c.queue(None).unwrap().as_str(), "main");
        assert_eq!(c.queue(Some("drop-2")).unwrap().as_str(), "drop-2");
        assert_eq!(c.queue(Some("other")), Err(QueueChoiceError::Unknown));
        assert!(matches!(
            c.queue(Some("Bad Id")),
            Err(QueueChoiceError::Invalid(_))
        ));
    }

    #[test]
    fn queues_may_be_allowed_by_a_pattern() {
        let c = config(&[("QUEUES", "main, drop-*")]).unwrap();
        assert_eq!(
            c.queue(Some("drop-2026-12")).unwrap().as_str(),
            "drop-2026-12"
        );
        assert_eq!(c.queue(Some("drop-")).unwrap().as_str(), "drop-");
        assert_eq!(c.queue(Some("dro")), Err(QueueChoiceError::Unknown));
        assert_eq!(c.queue(Some("main")).unwrap().as_str(), "main");
        let any = config(&[("QUEUES", "main,*")]).unwrap();
        assert_eq!(any.queue(Some("whatever")).unwrap().as_str(), "whatever");
        assert!(matches!(
            any.queue(Some("Not Valid")),
            Err(QueueChoiceError::Invalid(_))
        ));
        for bad in ["main, Drop-*", "main, drop-**", "main, d{x}*"] {
            let e = config(&[("QUEUES", bad)]).unwrap_err();
            assert!(e.to_string().contains("QUEUES"), "{bad}: {e}");
        }
        // A protected route may name a queue the pattern allows.
        let routed = config(&[
            ("QUEUES", "main, drop-*"),
            ("PROTECTED_ROUTES", "POST /orders, POST /drop/*@drop-7"),
        ])
        .unwrap();
        assert_eq!(
            routed
                .protecting_queue("POST", "/drop/x")
                .map(|q| q.as_str()),
            Some("drop-7")
        );
        // The default queue must still be listed by name.
        assert!(config(&[("QUEUES", "drop-*")]).is_err());
    }

    #[test]
    fn routes_browse_or_spend_by_method_unless_told() {
        let c = config(&[(
            "PROTECTED_ROUTES",
            "POST /orders, GET /checkout/*, browse POST /cart/*, SPEND get /claim/*",
        )])
        .unwrap();
        let kind = |m: &str, p: &str| c.protection(m, p).map(|(_, k)| k);
        assert_eq!(kind("POST", "/orders"), Some(RouteKind::Spend));
        assert_eq!(kind("GET", "/checkout/1"), Some(RouteKind::Browse));
        assert_eq!(kind("POST", "/cart/add"), Some(RouteKind::Browse));
        assert_eq!(kind("GET", "/claim/1"), Some(RouteKind::Spend));
        // HEAD follows GET and never spends.
        assert_eq!(kind("HEAD", "/checkout/1"), Some(RouteKind::Browse));
        assert_eq!(kind("HEAD", "/claim/1"), Some(RouteKind::Browse));
        assert_eq!(kind("HEAD", "/orders"), None);
        // Paths match as the origin routes them; a prefix covers its root.
        for p in [
            "/Checkout/1",
            "/checkout/./1",
            "//checkout//1",
            "/%63heckout/1",
            "/checkout",
        ] {
            assert_eq!(kind("GET", p), Some(RouteKind::Browse), "{p}");
        }
        assert_eq!(kind("POST", "/ORDERS/"), Some(RouteKind::Spend));
        assert_eq!(kind("GET", "/checkoutx"), None);
        // A path too long to normalise is gated, never passed.
        assert_eq!(kind("GET", &"/a".repeat(5_000)), Some(RouteKind::Spend));
    }

    #[test]
    fn two_lines_that_treat_one_request_differently_are_refused() {
        for (routes, named) in [
            (
                "GET /checkout/*, spend GET /checkout/pay",
                "GET /checkout/pay",
            ),
            ("spend GET /a/*, GET /a/b/*", "GET /a/b"),
            ("POST /orders, POST /orders@other", "POST /orders"),
            ("GET /x, spend GET /X/", "GET /x"),
        ] {
            let e = config(&[("PROTECTED_ROUTES", routes), ("QUEUES", "main,other")])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("both match") && e.contains(named),
                "{routes}: {e}"
            );
        }
        // Agreeing or disjoint lines are fine.
        for routes in [
            "GET /checkout/*, GET /checkout/pay",
            "GET /orders, POST /orders",
            "spend GET /claim/*, GET /checkout/*",
        ] {
            assert!(config(&[("PROTECTED_ROUTES", routes)]).is_ok(), "{routes}");
        }
        let e = config(&[("PROTECTED_ROUTES", "GET /a*b")]).unwrap_err();
        assert!(e.to_string().contains("`*` may only end a path"), "{e}");
    }

    #[test]
    fn protected_routes_parse_and_match() {
        let c = config(&[("PROTECTED_ROUTES", "POST /orders, put /checkout/*")]).unwrap();
        assert!(c.is_protected("PUT", "/checkout/42"));
        assert!(!c.is_protected("PUT", "/checkoutx"));
        assert!(config(&[("PROTECTED_ROUTES", "/orders")]).is_err());
        assert_eq!(
            c.protecting_queue("POST", "/orders").map(|q| q.as_str()),
            Some("main"),
            "a route without @ belongs to QUEUE_ID"
        );
        assert_eq!(c.protecting_queue("GET", "/orders"), None);
        let two = config(&[
            ("QUEUES", "main,vip"),
            ("PROTECTED_ROUTES", "POST /orders@main, POST /vip/*@vip"),
        ])
        .unwrap();
        assert_eq!(
            two.protecting_queue("POST", "/vip/orders")
                .map(|q| q.as_str()),
            Some("vip")
        );
        assert_eq!(
            two.protecting_queue("POST", "/orders").map(|q| q.as_str()),
            Some("main")
        );
        let unknown = config(&[("PROTECTED_ROUTES", "POST /orders@vip")]).unwrap_err();
        assert!(unknown.to_string().contains("not in QUEUES"), "{unknown}");
        assert!(config(&[("PROTECTED_ROUTES", "POST /orders@Bad Queue")]).is_err());
        assert!(config(&[("PROTECTED_ROUTES", "POST /queue/enter")]).is_err());
    }

    #[test]
    fn bad_values_name_their_variable() {
        for (pairs, name) in [
            (vec![("QUEUE_ID", "Main")], "QUEUE_ID"),
            (vec![("QUEUES", "other")], "QUEUES"),
            (vec![("IDENTITY_MODE", "oauth")], "IDENTITY_MODE"),
            (vec![("IDENTITY_SECRET", "short")], "IDENTITY_SECRET"),
            (vec![("IDENTITY_MODE", "jwt")], "JWT_SECRET"),
            (
                vec![
                    ("IDENTITY_MODE", "jwt"),
                    ("JWT_SECRET", S),
                    ("JWKS_URL", "https://login.example/.well-known/jwks.json"),
                ],
                "JWKS_URL",
            ),
            (
                vec![
                    ("IDENTITY_MODE", "jwt"),
                    ("JWKS_URL", "http://login.example/jwks"),
                    ("JWT_ISSUER", "https://login.example/"),
                ],
                "JWKS_URL",
            ),
            (
                vec![
                    ("IDENTITY_MODE", "jwt"),
                    ("JWKS_URL", "https://login.example/.well-known/jwks.json"),
                ],
                "JWT_ISSUER",
            ),
            (
                vec![
                    ("IDENTITY_MODE", "jwt"),
                    (
                        "JWKS_URL",
                        "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com",
                    ),
                    ("JWT_ISSUER", "https://securetoken.google.com/shop"),
                ],
                "JWT_AUDIENCE",
            ),
            (
                vec![
                    ("IDENTITY_MODE", "jwt"),
                    ("JWKS_URL", "https://appleid.apple.com/auth/keys"),
                    ("JWT_ISSUER", "https://appleid.apple.com"),
                ],
                "JWT_AUDIENCE",
            ),
            (vec![("ORIGIN_URL", "ftp://x")], "ORIGIN_URL"),
            (vec![("REDIS_TIMEOUT_MS", "0")], "REDIS_TIMEOUT_MS"),
            (vec![("ORIGIN_TIMEOUT_MS", "99")], "ORIGIN_TIMEOUT_MS"),
            (vec![("ORIGIN_TIMEOUT_MS", "2m")], "ORIGIN_TIMEOUT_MS"),
            (vec![("COOKIE_SECURE", "yes")], "COOKIE_SECURE"),
        ] {
            assert_eq!(config(&pairs).unwrap_err().name, name, "{pairs:?}");
        }
    }

    #[test]
    fn a_jwks_replaces_the_shared_secret_and_claims_can_be_required() {
        let c = config(&[
            ("IDENTITY_MODE", "jwt"),
            ("JWKS_URL", "https://login.example/.well-known/jwks.json"),
            ("JWT_AUDIENCE", "shop-api"),
            ("JWT_ISSUER", "https://login.example/"),
        ])
        .unwrap();
        match &c.identity {
            IdentityMode::Jwt { jwks, secret, .. } => {
                assert_eq!(
                    jwks.as_deref(),
                    Some("https://login.example/.well-known/jwks.json")
                );
                assert_eq!(
                    secret,
                    &Key::new(S.as_bytes()),
                    "place cookies: IDENTITY_SECRET"
                );
            }
            other => panic!("{other:?}"),
        }
        let expect = c.identity.expect();
        assert_eq!(
            (expect.audience, expect.issuer),
            (Some("shop-api"), Some("https://login.example/"))
        );
        let hs = config(&[("IDENTITY_MODE", "jwt"), ("JWT_SECRET", S)]).unwrap();
        assert_eq!(
            hs.identity.expect(),
            queuegate_edge::identity::Expect::default()
        );
        assert!(
            config(&[
                ("IDENTITY_MODE", "jwt"),
                ("JWKS_URL", "http://127.0.0.1:9/jwks.json"),
                ("JWT_ISSUER", "https://login.example/"),
            ])
            .is_ok(),
            "a loopback stand-in for tests"
        );
        // A tenant's own key set needs the issuer only; a shared one the
        // audience too.
        assert!(config(&[
            ("IDENTITY_MODE", "jwt"),
            (
                "JWKS_URL",
                "https://shop.eu.auth0.com/.well-known/jwks.json"
            ),
            ("JWT_ISSUER", "https://shop.eu.auth0.com/"),
        ])
        .is_ok());
        assert!(config(&[
            ("IDENTITY_MODE", "jwt"),
            (
                "JWKS_URL",
                "https://www.googleapis.com/service_accounts/v1/jwk/securetoken@system.gserviceaccount.com"
            ),
            ("JWT_ISSUER", "https://securetoken.google.com/shop"),
            ("JWT_AUDIENCE", "shop"),
        ])
        .is_ok());
    }

    #[test]
    fn debug_output_hides_secrets() {
        let c = config(&[
            ("UPSTASH_REDIS_REST_URL", "http://127.0.0.1:1"),
            ("UPSTASH_REDIS_REST_TOKEN", "tok-secret"),
        ])
        .unwrap();
        let text = format!("{c:?}");
        assert!(!text.contains(S) && !text.contains("tok-secret"), "{text}");
    }
}
