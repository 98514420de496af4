//! The Upstash REST protocol as data, apart from any I/O: requests become
//! [`Command`]s, Redis replies become JSON, and [`policy`] says which
//! commands a connection shared by every client must refuse.

mod command;
pub mod policy;
mod reply;

pub use command::{parse_batch, parse_command, parse_path, query_pairs, Command, TOKEN_PARAM};
pub use reply::{reply_json, server_error_text, Encoding, Outcome};
