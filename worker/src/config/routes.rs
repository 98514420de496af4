//! `PROTECTED_ROUTES`: which requests a line protects, and how.

use queuegate_edge::visit::match_path;
use queuegate_shared::ops::RouteKind;
use queuegate_shared::QueueId;

use super::{err, ConfigError};

/// A protected route: `[browse|spend] METHOD /path` or `… METHOD
/// /prefix/*`, with the queue that guards it after `@` (`POST
/// /orders@main`; none: `QUEUE_ID`). A route belongs to one queue, so a
/// visitor cannot pick the emptiest queue with `?queue=` to pass through
/// or to use a token of another line.
///
/// Its kind (README, *Browse and spend routes*): a **browse** route passes
/// any number of times during the visitor's session, a **spend** route
/// takes the one-time order token. Without a word, `GET` and `HEAD` routes
/// browse and every other method spends. A `GET` route covers `HEAD` too,
/// and a `HEAD` never spends. Paths match as the origin routes them
/// ([`queuegate_edge::visit::match_path`]: case, dot segments, doubled
/// slashes), and a prefix rule `/checkout/*` covers `/checkout` itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteRule {
    /// Browse or spend.
    pub kind: RouteKind,
    /// Upper-case method.
    pub method: String,
    /// Path, or path prefix when `prefix` is true (normalised, lower case;
    /// a prefix keeps its trailing `/`).
    pub path: String,
    /// Matches every path under `path`.
    pub prefix: bool,
    /// The queue named after `@`, if any.
    pub queue: Option<QueueId>,
}

impl RouteRule {
    /// Parses `POST /orders`, `POST /checkout/*`, either with `@queue`, and
    /// any of them after `browse` or `spend`.
    pub fn parse(text: &str) -> Result<RouteRule, ConfigError> {
        let whole = text.trim();
        let (kind, text) = match whole.split_once(' ') {
            Some((word, rest)) if word.eq_ignore_ascii_case("browse") => {
                (Some(RouteKind::Browse), rest)
            }
            Some((word, rest)) if word.eq_ignore_ascii_case("spend") => {
                (Some(RouteKind::Spend), rest)
            }
            _ => (None, whole),
        };
        let (text, queue) = match text.trim().rsplit_once('@') {
            Some((route, queue)) => {
                let id = QueueId::new(queue.trim())
                    .map_err(|e| err("PROTECTED_ROUTES", format!("bad queue in {text:?}: {e}")))?;
                (route, Some(id))
            }
            None => (text, None),
        };
        let (method, path) = text.trim().split_once(' ').ok_or_else(|| {
            err(
                "PROTECTED_ROUTES",
                format!("{text:?} is not `METHOD /path`"),
            )
        })?;
        let method = method.trim().to_ascii_uppercase();
        let path = path.trim();
        if !method.bytes().all(|b| b.is_ascii_uppercase()) || method.is_empty() {
            return Err(err("PROTECTED_ROUTES", format!("bad method in {text:?}")));
        }
        if !path.starts_with('/') || path.starts_with("/queue") {
            return Err(err(
                "PROTECTED_ROUTES",
                format!("{path:?} must start with / and not be under /queue"),
            ));
        }
        let (path, prefix) = match path.strip_suffix('*') {
            Some(p) => (p, true),
            None => (path, false),
        };
        if path.contains('*') {
            return Err(err(
                "PROTECTED_ROUTES",
                format!("{text:?}: `*` may only end a path, as in /checkout/*"),
            ));
        }
        let normal = match_path(path).ok_or_else(|| err("PROTECTED_ROUTES", "path too long"))?;
        // A prefix keeps its slash: `/checkout/*` is not `/checkoutx`.
        let path = if prefix && normal != "/" {
            format!("{normal}/")
        } else {
            normal
        };
        let kind = kind.unwrap_or(match method.as_str() {
            "GET" | "HEAD" => RouteKind::Browse,
            _ => RouteKind::Spend,
        });
        Ok(RouteRule {
            kind,
            method,
            path,
            prefix,
            queue,
        })
    }

    /// True when a request with this method and (normalised, see
    /// [`match_path`]) path is protected by this rule. A `GET` rule
    /// covers `HEAD`.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        let method_matches = method.eq_ignore_ascii_case(&self.method)
            || (method.eq_ignore_ascii_case("HEAD") && self.method == "GET");
        method_matches && self.covers(path)
    }

    pub(super) fn covers(&self, path: &str) -> bool {
        if self.prefix {
            path.starts_with(&self.path) || self.path.strip_suffix('/') == Some(path)
        } else {
            path == self.path
        }
    }

    /// The kind a request with `method` meets here: a `HEAD` only reads,
    /// so it never spends.
    pub fn kind_for(&self, method: &str) -> RouteKind {
        if method.eq_ignore_ascii_case("HEAD") {
            RouteKind::Browse
        } else {
            self.kind
        }
    }

    /// A request both rules match, when they would treat it differently
    /// (another kind or another queue): the configuration is ambiguous.
    pub(super) fn clash(&self, other: &RouteRule) -> Option<String> {
        let methods = self.method == other.method;
        if !methods || (self.kind == other.kind && self.queue == other.queue) {
            return None;
        }
        // The longer of two overlapping rules is a request both match.
        let sample = |r: &RouteRule| r.path.trim_end_matches('/').to_string();
        let (a, b) = (sample(self), sample(other));
        let both = [a, b]
            .into_iter()
            .map(|p| if p.is_empty() { "/".to_string() } else { p })
            .find(|p| self.covers(p) && other.covers(p))?;
        Some(format!("{} {both}", self.method))
    }

    pub(super) fn describe(&self) -> String {
        let star = if self.prefix { "*" } else { "" };
        let queue = self
            .queue
            .as_ref()
            .map(|q| format!("@{q}"))
            .unwrap_or_default();
        format!(
            "{} {} {}{star}{queue}",
            self.kind.as_str(),
            self.method,
            self.path
        )
    }
}
