//! Every way a request can fail, mapped to a status and a public
//! `{"error","message"}` body in one place. Causes are logged once, never
//! sent: a reply never carries internals.

use queuegate_edge::altcha::AltchaError;
use queuegate_edge::identity::IdentityError;
use queuegate_shared::policy::retry_after_header_seconds;
use queuegate_shared::refusal::Refusal;
use worker::Method;

/// An edge failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EdgeError {
    /// The request itself is malformed (e.g. a body that is not the
    /// documented JSON).
    #[error("bad request: {0}")]
    BadRequest(String),
    /// `?queue=` is not a queue id.
    #[error("invalid queue id: {0}")]
    InvalidQueue(String),
    /// `?queue=` names a queue this edge does not serve.
    #[error("unknown queue")]
    UnknownQueue,
    /// No such route under /queue.
    #[error("not found")]
    NotFound,
    /// Known route, wrong method.
    #[error("method not allowed")]
    MethodNotAllowed {
        /// The methods the route takes (the `Allow` header), from the route
        /// table.
        allow: &'static [Method],
    },
    /// No identity where one is needed.
    #[error("identity required")]
    IdentityRequired,
    /// Forged, tampered or expired identity.
    #[error("identity invalid: {0}")]
    IdentityInvalid(IdentityError),
    /// The line is at its maximum.
    #[error("queue full")]
    QueueFull,
    /// The queue takes no entries (closed, draining or not configured).
    #[error("queue closed")]
    QueueClosed,
    /// A prefetch or prerender of a protected route that the visitor's
    /// session does not let through: it spends and opens nothing.
    #[error("prefetch declined")]
    PrefetchDeclined,
    /// No entry token on a protected route, and the room is not idle (or
    /// passthrough is off): join the queue at `page`.
    #[error("queue required")]
    QueueRequired {
        /// The waiting-room page of the queue.
        page: String,
        /// The visitor holds a token already: they must send it.
        holds: bool,
    },
    /// Wrong, unknown or lapsed token.
    #[error("token invalid")]
    TokenInvalid,
    /// A bypass link that is unknown, revoked or expired.
    #[error("bypass invalid: {0}")]
    BypassInvalid(String),
    /// The token was already used.
    #[error("token used")]
    TokenUsed,
    /// The queue's kept stock is gone: no order reaches the shop, no new
    /// place is taken.
    #[error("sold out")]
    SoldOut,
    /// The token activates later.
    #[error("token not active for {wait_ms} ms")]
    NotYetActive {
        /// Milliseconds to wait.
        wait_ms: u64,
    },
    /// A new place needs a proof-of-work solution (`GET /queue/challenge`).
    #[error("challenge required")]
    ChallengeRequired,
    /// The solution is forged, wrong, expired or for another queue.
    #[error("challenge refused: {0}")]
    ChallengeInvalid(AltchaError),
    /// The solution was used for a place before.
    #[error("challenge reused")]
    ChallengeReused,
    /// The solution's difficulty level is below the one now in force.
    #[error("challenge stale")]
    ChallengeStale,
    /// The client address took its budget of new places.
    #[error("too many entries; retry in {retry_after_ms} ms")]
    TooManyEntries {
        /// Milliseconds until the budget holds a place again.
        retry_after_ms: u64,
    },
    /// The client's address group holds as many live places as the queue
    /// allows one address (`entry_places_per_address`).
    #[error("address full: {cap} places")]
    AddressFull {
        /// The cap in force.
        cap: u64,
    },
    /// A new place needs a Turnstile token.
    #[error("turnstile required")]
    TurnstileRequired,
    /// Turnstile said no (its error codes).
    #[error("turnstile refused: {0}")]
    TurnstileFailed(String),
    /// Turnstile could not be asked and we fail closed.
    #[error("turnstile unavailable: {0}")]
    TurnstileUnavailable(String),
    /// Redis (over REST) cannot be reached or refused us: fail closed.
    #[error("redis unavailable: {0}")]
    RedisUnavailable(String),
    /// The database refused for one of its plan's limits (Upstash's
    /// request, connection, size or capacity quota). To visitors it is an
    /// outage like any other, with a longer wait; to the operator it is a
    /// line of its own in the logs (the plan needs raising).
    #[error("redis plan limit reached: {0}")]
    RedisLimited(String),
    /// Redis refused a command it did not run (out of memory, busy with a
    /// script, loading, a read-only replica): nothing changed, and the
    /// same request may succeed in a moment. The log line names the
    /// refusal and what to look at.
    #[error("redis refused ({refusal}: {advice}): {detail}", advice = refusal.advice())]
    RedisRefused {
        /// Which refusal.
        refusal: Refusal,
        /// Redis' own words.
        detail: String,
    },
    /// The login service's published keys (`JWKS_URL`) could not be read
    /// and none are held.
    #[error("login keys unavailable: {0}")]
    KeysUnavailable(String),
    /// The worker's own configuration is wrong.
    #[error("misconfigured: {0}")]
    Misconfigured(String),
    /// The origin could not be reached.
    #[error("origin unreachable: {0}")]
    OriginUnreachable(String),
    /// The origin did not answer within `ORIGIN_TIMEOUT_MS`.
    #[error("origin timeout after {0} ms")]
    OriginTimeout(u64),
    /// A bug: a script reply we cannot decode, a JS call that failed.
    #[error("internal: {0}")]
    Internal(String),
}

/// `GET, HEAD`: methods as an `Allow` header lists them.
fn allow_list(methods: &[Method]) -> String {
    let names: Vec<&str> = methods.iter().map(|m| m.as_ref()).collect();
    names.join(", ")
}

/// Retry-After for a full queue, seconds.
pub const FULL_RETRY_AFTER_S: u64 = 30;
/// Retry-After for a closed queue, seconds.
pub const CLOSED_RETRY_AFTER_S: u64 = 60;
/// Retry-After while Redis is unreachable, seconds.
pub const UNAVAILABLE_RETRY_AFTER_S: u64 = 5;

/// Retry-After (s) while the database refuses for a plan limit: such a
/// limit does not lift within seconds, and a crowd retrying every 5 s only
/// adds refused requests.
pub const LIMITED_RETRY_AFTER_S: u64 = 30;

impl EdgeError {
    /// HTTP status.
    pub fn status(&self) -> u16 {
        match self {
            EdgeError::InvalidQueue(_) | EdgeError::BadRequest(_) => 400,
            EdgeError::IdentityRequired | EdgeError::IdentityInvalid(_) => 401,
            EdgeError::QueueRequired { .. }
            | EdgeError::TokenInvalid
            | EdgeError::BypassInvalid(_) => 403,
            EdgeError::ChallengeRequired
            | EdgeError::ChallengeInvalid(_)
            | EdgeError::ChallengeStale
            | EdgeError::TurnstileRequired
            | EdgeError::TurnstileFailed(_) => 403,
            EdgeError::ChallengeReused => 409,
            EdgeError::TooManyEntries { .. } | EdgeError::AddressFull { .. } => 429,
            EdgeError::TurnstileUnavailable(_) => 503,
            EdgeError::UnknownQueue | EdgeError::NotFound => 404,
            EdgeError::MethodNotAllowed { .. } => 405,
            EdgeError::TokenUsed | EdgeError::SoldOut => 409,
            EdgeError::QueueFull | EdgeError::NotYetActive { .. } => 429,
            EdgeError::Misconfigured(_) | EdgeError::Internal(_) => 500,
            EdgeError::OriginUnreachable(_) => 502,
            EdgeError::OriginTimeout(_) => 504,
            EdgeError::QueueClosed
            | EdgeError::PrefetchDeclined
            | EdgeError::RedisUnavailable(_)
            | EdgeError::RedisLimited(_)
            | EdgeError::RedisRefused { .. }
            | EdgeError::KeysUnavailable(_) => 503,
        }
    }

    /// The machine-readable `error` code.
    pub fn code(&self) -> &'static str {
        match self {
            EdgeError::InvalidQueue(_) => "invalid_queue",
            EdgeError::BadRequest(_) => "bad_request",
            EdgeError::UnknownQueue => "unknown_queue",
            EdgeError::NotFound => "not_found",
            EdgeError::MethodNotAllowed { .. } => "method_not_allowed",
            EdgeError::IdentityRequired => "identity_required",
            EdgeError::IdentityInvalid(_) => "identity_invalid",
            EdgeError::QueueFull => "queue_full",
            EdgeError::QueueClosed => "queue_closed",
            EdgeError::PrefetchDeclined => "prefetch_declined",
            EdgeError::QueueRequired { .. } => "queue_required",
            EdgeError::TokenInvalid => "token_invalid",
            EdgeError::BypassInvalid(_) => "bypass_invalid",
            EdgeError::TokenUsed => "token_used",
            EdgeError::SoldOut => "sold_out",
            EdgeError::ChallengeRequired => "challenge_required",
            EdgeError::ChallengeInvalid(AltchaError::Expired) => "challenge_expired",
            EdgeError::ChallengeInvalid(_) => "challenge_invalid",
            EdgeError::ChallengeReused => "challenge_reused",
            EdgeError::ChallengeStale => "challenge_stale",
            EdgeError::TooManyEntries { .. } => "too_many_entries",
            EdgeError::AddressFull { .. } => "address_full",
            EdgeError::TurnstileRequired => "turnstile_required",
            EdgeError::TurnstileFailed(_) => "turnstile_failed",
            EdgeError::TurnstileUnavailable(_) => "turnstile_unavailable",
            EdgeError::NotYetActive { .. } => "not_yet_active",
            EdgeError::RedisUnavailable(_)
            | EdgeError::RedisLimited(_)
            | EdgeError::RedisRefused { .. }
            | EdgeError::KeysUnavailable(_) => "unavailable",
            EdgeError::Misconfigured(_) => "misconfigured",
            EdgeError::OriginUnreachable(_) => "origin_unreachable",
            EdgeError::OriginTimeout(_) => "origin_timeout",
            EdgeError::Internal(_) => "internal",
        }
    }

    /// Human text for the reply: safe to show, no internals.
    pub fn public_message(&self) -> String {
        match self {
            EdgeError::InvalidQueue(why) => format!("The queue id is not valid: {why}."),
            EdgeError::BadRequest(why) => format!("The request is not valid: {why}."),
            EdgeError::UnknownQueue => "There is no such queue here.".into(),
            EdgeError::NotFound => "There is nothing at this address.".into(),
            EdgeError::MethodNotAllowed { allow } => {
                format!("This address takes only {}.", allow_list(allow))
            }
            EdgeError::IdentityRequired => {
                "Join the queue first (POST /queue/enter), or sign in.".into()
            }
            EdgeError::IdentityInvalid(e) => format!("We could not verify who you are: {e}."),
            EdgeError::QueueFull => "The queue is full. Please try again shortly.".into(),
            EdgeError::QueueClosed => "The queue is not taking new visitors right now.".into(),
            EdgeError::PrefetchDeclined => {
                "A prefetch does not pass the waiting room: open the page itself.".into()
            }
            EdgeError::QueueRequired { page, holds: false } => {
                format!("Please join the queue first: {page}")
            }
            EdgeError::QueueRequired { page, holds: true } => format!(
                "You hold an entry token: send it (X-Entry-Token), or see your place at {page}"
            ),
            EdgeError::TokenInvalid => "The entry token is not valid.".into(),
            EdgeError::BypassInvalid(_) => {
                "This bypass link is not valid: it was revoked, has expired or is mistyped.".into()
            }
            EdgeError::TokenUsed => "The entry token has already been used.".into(),
            EdgeError::SoldOut => "Sold out: no stock is left for this sale.".into(),
            EdgeError::ChallengeRequired => {
                "A new place needs a solved challenge: GET /queue/challenge, then send the solution in X-Altcha.".into()
            }
            EdgeError::ChallengeInvalid(e) => format!("The challenge solution was refused: {e}."),
            EdgeError::ChallengeReused => {
                "This challenge solution was already used; solve a new one.".into()
            }
            EdgeError::ChallengeStale => {
                "The queue grew while the challenge was solved, so it now needs a harder one: GET /queue/challenge and solve it again.".into()
            }
            EdgeError::TooManyEntries { retry_after_ms } => format!(
                "Too many new visitors from your network; try again in {} s.",
                retry_after_header_seconds(*retry_after_ms)
            ),
            EdgeError::AddressFull { cap } => format!(
                "Your network already holds {cap} places in this queue; try again once one of them is through."
            ),
            EdgeError::TurnstileRequired => "A new place needs a Turnstile check.".into(),
            EdgeError::TurnstileFailed(_) => "The Turnstile check failed; please try again.".into(),
            EdgeError::TurnstileUnavailable(_) => {
                "The browser check is unavailable right now; please try again shortly.".into()
            }
            EdgeError::NotYetActive { wait_ms } => format!(
                "Your entry token becomes active in {} s.",
                retry_after_header_seconds(*wait_ms)
            ),
            EdgeError::RedisUnavailable(_)
            | EdgeError::RedisLimited(_)
            | EdgeError::RedisRefused { .. } => {
                "The waiting room is briefly unavailable. Please retry.".into()
            }
            EdgeError::KeysUnavailable(_) => {
                "We cannot check sign-ins right now. Please retry shortly.".into()
            }
            EdgeError::Misconfigured(_) => "The waiting room is not configured correctly.".into(),
            EdgeError::OriginUnreachable(_) => {
                "The shop could not be reached. Please retry.".into()
            }
            EdgeError::OriginTimeout(_) => {
                "The shop did not answer in time. Your entry token is kept: please retry.".into()
            }
            EdgeError::Internal(_) => "Something went wrong on our side.".into(),
        }
    }

    /// Seconds for a `Retry-After` header, where one fits.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            EdgeError::QueueFull | EdgeError::AddressFull { .. } => Some(FULL_RETRY_AFTER_S),
            EdgeError::QueueClosed => Some(CLOSED_RETRY_AFTER_S),
            EdgeError::NotYetActive { wait_ms } => Some(retry_after_header_seconds(*wait_ms)),
            EdgeError::TooManyEntries { retry_after_ms } => {
                Some(retry_after_header_seconds(*retry_after_ms))
            }
            EdgeError::RedisUnavailable(_)
            | EdgeError::RedisRefused { .. }
            | EdgeError::OriginUnreachable(_)
            | EdgeError::OriginTimeout(_)
            | EdgeError::TurnstileUnavailable(_)
            | EdgeError::KeysUnavailable(_) => Some(UNAVAILABLE_RETRY_AFTER_S),
            EdgeError::RedisLimited(_) => Some(LIMITED_RETRY_AFTER_S),
            _ => None,
        }
    }

    /// Whether the remedy is the waiting room: a person who met this on a
    /// protected page is sent there (303) instead of shown JSON.
    pub fn sends_to_room(&self) -> bool {
        matches!(
            self,
            EdgeError::QueueRequired { .. }
                | EdgeError::TokenInvalid
                | EdgeError::TokenUsed
                | EdgeError::NotYetActive { .. }
                | EdgeError::IdentityRequired
        )
    }

    /// The `Allow` header of a 405.
    pub fn allow(&self) -> Option<String> {
        match self {
            EdgeError::MethodNotAllowed { allow } => Some(allow_list(allow)),
            _ => None,
        }
    }

    /// Whether Redis could not be reached or refused for now (a gateway
    /// restarting, a fail-over, a limit): the same call may succeed a
    /// moment later. Script answers and bugs are not.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            EdgeError::RedisUnavailable(_)
                | EdgeError::RedisLimited(_)
                | EdgeError::RedisRefused { .. }
        )
    }

    /// Whether the cause belongs in the log (server-side faults).
    pub fn is_server_fault(&self) -> bool {
        self.status() >= 500
    }

    /// The JSON body (with the queue page's address when the client must
    /// join the queue).
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: self.code(),
            message: self.public_message(),
            queue_url: match self {
                EdgeError::QueueRequired { page, .. } => Some(page),
                _ => None,
            },
        }
    }
}

/// An error reply's JSON body: `{"error", "message"[, "queueUrl"]}`.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody<'a> {
    /// The stable code ([`EdgeError::code`]).
    pub error: &'static str,
    /// Words for a person, never the cause.
    pub message: String,
    /// The queue page to join, when the client must.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_url: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_never_carry_causes() {
        let e = EdgeError::RedisUnavailable("connect ECONNREFUSED 127.0.0.1:6390 token=abc".into());
        let body = serde_json::to_string(&e.body()).unwrap();
        assert!(
            !body.contains("ECONNREFUSED") && !body.contains("abc"),
            "{body}"
        );
        assert_eq!(
            (e.status(), e.code(), e.retry_after_s()),
            (503, "unavailable", Some(5))
        );
        let e = EdgeError::Internal("decode: field 3".into());
        let body = serde_json::to_string(&e.body()).unwrap();
        assert!(!body.contains("field 3"));
        assert_eq!(
            serde_json::to_value(e.body()).unwrap(),
            serde_json::json!({"error": "internal", "message": e.public_message()})
        );
    }

    #[test]
    fn contract_statuses_and_codes() {
        assert_eq!(
            (EdgeError::QueueFull.status(), EdgeError::QueueFull.code()),
            (429, "queue_full")
        );
        assert_eq!(EdgeError::QueueClosed.status(), 503);
        assert_eq!(EdgeError::TokenInvalid.status(), 403);
        assert_eq!(EdgeError::TokenUsed.status(), 409);
        let early = EdgeError::NotYetActive { wait_ms: 1_200 };
        assert_eq!((early.status(), early.retry_after_s()), (429, Some(2)));
        assert_eq!(EdgeError::UnknownQueue.status(), 404);
        assert_eq!(EdgeError::IdentityRequired.status(), 401);
        let join = EdgeError::QueueRequired {
            page: "/queue?queue=main".into(),
            holds: false,
        };
        assert_eq!((join.status(), join.code()), (403, "queue_required"));
        assert_eq!(
            serde_json::to_value(join.body()).unwrap()["queueUrl"],
            "/queue?queue=main"
        );
        let stale = EdgeError::ChallengeStale;
        assert_eq!(
            (stale.status(), stale.code(), stale.retry_after_s()),
            (403, "challenge_stale", None)
        );
        let slow = EdgeError::OriginTimeout(10_000);
        assert_eq!(
            (slow.status(), slow.code(), slow.retry_after_s()),
            (504, "origin_timeout", Some(UNAVAILABLE_RETRY_AFTER_S))
        );
    }

    #[test]
    fn method_not_allowed_lists_the_methods() {
        let e = EdgeError::MethodNotAllowed {
            allow: &[Method::Get, Method::Head],
        };
        assert_eq!(e.allow().as_deref(), Some("GET, HEAD"));
        assert_eq!(e.public_message(), "This address takes only GET, HEAD.");
        assert_eq!(EdgeError::NotFound.allow(), None);
    }
}
