//! queuegate's domain, shared by the edge worker (wasm) and the scheduler
//! (native). No runtime, no Redis client: requests build script invocations
//! and replies decode client-neutral values.
//!
//! * [`keys`] — the key schema and id validation.
//! * [`fields`] — the fields of the queue's hashes and records.
//! * [`records`] — the shapes of script arguments and replies.
//! * [`reply`] — the tags of the scripts' replies.
//! * [`guard`] — the entry guard: address budgets, proof of work.
//! * [`script`] — the Lua scripts (`lua/*.lua`) and their SHA-1s.
//! * [`draw`] — the pre-queue's draw: a keyed permutation both sides evaluate.
//! * [`draw_proof`] — a draw anyone can verify: commitment, Merkle record, receipts.
//! * [`ops`] — one typed request and reply per script.
//! * [`value`] — the reply type both clients convert into.
//! * [`refusal`] — Redis refusing a command it did not run (OOM, BUSY, …).
//! * [`settings`] — queue settings, their validation and hash codec.
//! * [`state`] — the visitor states of the edge API.
//! * [`policy`] — retryAfter and ETA.
//! * [`token`] — entry tokens and admission grants.

#[macro_use]
mod names;

pub mod beacon;
pub mod bypass;
pub mod chance;
pub mod draw;
pub mod draw_proof;
pub mod fields;
pub mod guard;
pub mod json;
pub mod keys;
#[cfg(not(target_arch = "wasm32"))]
mod lua;
/// Shared with build.rs, which ships the Lua without comment lines.
#[cfg(test)]
mod lua_strip;
pub mod notice;
pub mod ops;
pub mod policy;
pub mod records;
pub mod refusal;
pub mod reply;
pub mod script;
pub mod settings;
pub mod snapshot;
pub mod state;
pub mod token;
pub mod value;

pub use keys::{Prefix, QueueId, QueueKeys, UserId};
pub use script::{Invocation, Operation};
pub use settings::{QueueState, Settings};
pub use value::{DecodeError, Value};
