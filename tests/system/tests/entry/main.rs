//! Who may take a place, end to end: the entry guard's proof of work and
//! address budget, and signed-in drops verified against a JWKS.

mod guard;
mod jwks;
