//! Environment variables that override the file (URLs and secrets stay out
//! of a file that is often world-readable or committed).

/// Replaces `[redis] url` (and clears `nodes`).
pub const REDIS_URL: &str = "QUEUEGATE_REDIS_URL";
/// Replaces `[redis] nodes`: comma-separated URLs (and clears `url`).
pub const REDIS_NODES: &str = "QUEUEGATE_REDIS_NODES";
/// Replaces `[redis] username`.
pub const REDIS_USERNAME: &str = "QUEUEGATE_REDIS_USERNAME";
/// Replaces `[redis] password`.
pub const REDIS_PASSWORD: &str = "QUEUEGATE_REDIS_PASSWORD";
/// Replaces `[http] listen`.
pub const LISTEN: &str = "QUEUEGATE_LISTEN";
/// The config file, when `--config` is not given.
pub const CONFIG: &str = "QUEUEGATE_CONFIG";
/// Replaces `[admin] listen`.
pub const ADMIN_LISTEN: &str = "QUEUEGATE_ADMIN_LISTEN";
/// Config from the environment alone: the queue's id (default `main`).
pub const QUEUE: &str = "QUEUEGATE_QUEUE";
/// Config from the environment alone: the admin API's tokens,
/// `name=sha256:<hex>` pairs, comma-separated.
pub const ADMIN_TOKENS: &str = "QUEUEGATE_ADMIN_TOKENS";
/// Config from the environment alone: `[redis] key_prefix`.
pub const KEY_PREFIX: &str = "QUEUEGATE_KEY_PREFIX";
/// Config from the environment alone: the queue's scheduled opening
/// (RFC 3339).
pub const OPENS_AT: &str = "QUEUEGATE_OPENS_AT";
/// Config from the environment alone: the queue's scheduled closing.
pub const CLOSES_AT: &str = "QUEUEGATE_CLOSES_AT";

/// The variable of a queue setting: `QUEUEGATE_` and its name in capitals
/// (`QUEUEGATE_ADMIT_RATE_PER_SECOND`).
pub fn setting_var(name: &str) -> String {
    format!("QUEUEGATE_{}", name.to_ascii_uppercase())
}
