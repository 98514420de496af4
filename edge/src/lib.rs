//! The edge's protocol as pure functions, apart from the Workers runtime:
//! the worker calls them on requests, and native code (the demo shop, system
//! tests, fuzz targets) checks and forges the same values without workers-rs.
//!
//! * [`cookie`] — our cookie names (one prefix), reading and writing cookies.
//! * [`identity`] — signed visitor cookies and HS256 JWTs.
//! * [`signing`] — the signed headers the origin can verify.
//! * [`url`] — path and query of a request URL, without the `url` crate.

pub mod cookie;
pub mod identity;
pub mod signing;
pub mod url;

/// Header that carries the entry token (the [`cookie::TOKEN_COOKIE`] cookie
/// may carry it instead); never forwarded to the origin.
pub const TOKEN_HEADER: &str = "x-entry-token";
