//! The route table: the paths the worker answers itself and their methods.
//! The one table both dispatches a request and writes a 405's `Allow`, so
//! the two cannot drift; every other path goes to the gate or the origin.

use worker::Method;

use crate::error::EdgeError;

/// What answers one of the worker's own routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// `PING` through REST.
    Health,
    /// Join the queue.
    Enter,
    /// The caller's state in the queue.
    Position,
    /// The waiting-room page.
    Page,
    /// A proof-of-work challenge for a new place.
    Challenge,
    /// Opens a staff bypass link: sets its cookie.
    Bypass,
    /// A draw's public record.
    Draw,
}

/// One route the worker answers itself.
#[derive(Debug)]
pub struct Route {
    /// The exact path.
    pub path: &'static str,
    /// The methods it takes, in `Allow` order.
    pub methods: &'static [Method],
    /// What answers it.
    pub handler: Handler,
}

/// The worker's own routes.
pub const ROUTES: &[Route] = &[
    Route {
        path: "/queue/health",
        methods: &[Method::Get, Method::Head],
        handler: Handler::Health,
    },
    Route {
        path: "/queue/enter",
        methods: &[Method::Post],
        handler: Handler::Enter,
    },
    Route {
        path: "/queue/position",
        methods: &[Method::Get],
        handler: Handler::Position,
    },
    Route {
        path: "/queue",
        methods: &[Method::Get, Method::Head],
        handler: Handler::Page,
    },
    Route {
        path: "/queue/challenge",
        methods: &[Method::Get],
        handler: Handler::Challenge,
    },
    Route {
        path: "/queue/bypass",
        methods: &[Method::Get],
        handler: Handler::Bypass,
    },
    Route {
        path: "/queue/draw",
        methods: &[Method::Get, Method::Head],
        handler: Handler::Draw,
    },
];

/// The `Allow` of every other path: the standard methods, passed through.
pub const PASS_THROUGH: &[Method] = &[
    Method::Get,
    Method::Head,
    Method::Post,
    Method::Put,
    Method::Patch,
    Method::Delete,
    Method::Options,
];

/// Paths under this prefix that are not in [`ROUTES`] are 404: the worker
/// owns the namespace, so a typo never reaches the origin.
const OWN_PREFIX: &str = "/queue/";

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// One of [`ROUTES`].
    Queue(Handler),
    /// A protected route: the token gate, then the origin.
    Gate,
    /// Straight to the origin.
    Forward,
}

/// Resolves a request. `method` is None when the runtime did not know it
/// (workers-rs reads QUERY, for one, as GET: acting on that would answer or
/// forward the wrong thing). `protected` says whether `METHOD path` needs a
/// token.
pub fn resolve(
    path: &str,
    method: Option<&Method>,
    protected: impl Fn(&str, &str) -> bool,
) -> Result<Target, EdgeError> {
    let route = ROUTES.iter().find(|r| r.path == path);
    let Some(method) = method else {
        return Err(EdgeError::MethodNotAllowed {
            allow: route.map_or(PASS_THROUGH, |r| r.methods),
        });
    };
    match route {
        Some(r) if r.methods.contains(method) => Ok(Target::Queue(r.handler)),
        Some(r) => Err(EdgeError::MethodNotAllowed { allow: r.methods }),
        None if path.starts_with(OWN_PREFIX) => Err(EdgeError::NotFound),
        None if protected(method.as_ref(), path) => Ok(Target::Gate),
        None => Ok(Target::Forward),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn orders(method: &str, path: &str) -> bool {
        method == "POST" && path == "/orders"
    }

    fn allow(r: Result<Target, EdgeError>) -> Option<String> {
        r.err().and_then(|e| e.allow())
    }

    #[test]
    fn own_routes_dispatch_by_method() {
        let get = Some(&Method::Get);
        assert_eq!(
            resolve("/queue/health", Some(&Method::Head), orders),
            Ok(Target::Queue(Handler::Health))
        );
        assert_eq!(
            resolve("/queue/enter", Some(&Method::Post), orders),
            Ok(Target::Queue(Handler::Enter))
        );
        assert_eq!(
            resolve("/queue/position", get, orders),
            Ok(Target::Queue(Handler::Position))
        );
        assert_eq!(
            resolve("/queue", get, orders),
            Ok(Target::Queue(Handler::Page))
        );
        assert_eq!(
            resolve("/queue/nope", get, orders),
            Err(EdgeError::NotFound)
        );
        assert_eq!(resolve("/queue/", get, orders), Err(EdgeError::NotFound));
    }

    #[test]
    fn other_paths_go_to_the_gate_or_the_origin() {
        let post = Some(&Method::Post);
        assert_eq!(resolve("/orders", post, orders), Ok(Target::Gate));
        assert_eq!(
            resolve("/orders", Some(&Method::Get), orders),
            Ok(Target::Forward)
        );
        assert_eq!(resolve("/queuex", post, orders), Ok(Target::Forward));
        assert_eq!(
            resolve("/x", Some(&Method::Trace), orders),
            Ok(Target::Forward)
        );
    }

    #[test]
    fn wrong_or_unknown_methods_get_the_tables_allow() {
        let put = Some(&Method::Put);
        assert_eq!(
            allow(resolve("/queue/enter", Some(&Method::Get), orders)).as_deref(),
            Some("POST")
        );
        assert_eq!(
            allow(resolve("/queue/health", put, orders)).as_deref(),
            Some("GET, HEAD")
        );
        assert_eq!(
            allow(resolve("/queue/position", put, orders)).as_deref(),
            Some("GET")
        );
        assert_eq!(
            allow(resolve("/queue", None, orders)).as_deref(),
            Some("GET, HEAD")
        );
        for path in ["/orders", "/", "/queue/nope"] {
            assert_eq!(
                allow(resolve(path, None, orders)).as_deref(),
                Some("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
                "{path}"
            );
        }
    }

    #[test]
    fn every_route_path_is_ours_and_unique() {
        for (i, r) in ROUTES.iter().enumerate() {
            assert!(r.path == "/queue" || r.path.starts_with(OWN_PREFIX));
            assert!(!r.methods.is_empty(), "{}", r.path);
            assert!(ROUTES[i + 1..].iter().all(|o| o.path != r.path));
        }
    }
}
