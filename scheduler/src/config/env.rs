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
