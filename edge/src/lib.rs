//! The edge's protocol as pure functions, apart from the Workers runtime:
//! the worker calls them on requests, and native code (the demo shop, system
//! tests, fuzz targets) checks and forges the same values without workers-rs.
//!
//! * [`altcha`] — the entry guard's proof of work (ALTCHA's classic
//!   challenge): made and checked here, its single use kept by Redis.
//! * [`cookie`] — our cookie names (one prefix), reading and writing cookies.
//! * [`identity`] — signed visitor cookies and HS256 JWTs.
//! * [`signing`] — the signed headers the origin can verify.
//! * [`url`] — path and query of a request URL, without the `url` crate.
//! * [`place`] — the signed place cookie far-back polls are answered from.
//! * [`session`] — the signed session pass a browse route's pages pass on.
//! * [`mac`] — HMAC-SHA-256, keyed in one place for all of the above.
//! * [`visit`] — a protected request's matched path and intent (prefetch,
//!   cross-site).

pub mod altcha;
pub mod cookie;
pub mod identity;
pub mod jwks;
pub mod lang;
pub mod mac;
pub mod navigation;
pub mod place;
pub mod session;
pub mod signing;
pub mod url;
pub mod visit;

/// Header that carries the entry token (the [`cookie::TOKEN_COOKIE`] cookie
/// may carry it instead); never forwarded to the origin.
pub const TOKEN_HEADER: &str = "x-entry-token";

/// Header that carries a Turnstile token (the widget's form field
/// `cf-turnstile-response` also works).
pub const TURNSTILE_HEADER: &str = "x-turnstile-token";

/// Where Cloudflare puts the client's address: the entry guard's budget
/// and idle passthrough count by it.
pub const CLIENT_IP_HEADER: &str = "cf-connecting-ip";
