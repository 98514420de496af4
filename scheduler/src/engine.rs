//! Runs the shared crate's script operations over redis-rs: EVALSHA with
//! the pinned SHA-1, EVAL once on NOSCRIPT, replies converted to the shared
//! [`Value`].

use queuegate_shared::refusal::Refusal;
use queuegate_shared::{Invocation, Operation, Value};
use redis::aio::ConnectionLike;

/// A failed script call.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Redis could not be reached or answered with an error.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The script answered with a shape its decoder does not accept.
    #[error(transparent)]
    Decode(#[from] queuegate_shared::DecodeError),
}

impl EngineError {
    /// Redis refused the command without running it (out of memory, busy,
    /// loading, a read-only replica: `queuegate_shared::refusal`); a
    /// retry after a backoff may succeed.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            EngineError::Redis(e) => e.code().and_then(Refusal::of_code),
            EngineError::Decode(_) => None,
        }
    }

    /// True when the error is about the connection (retry after a backoff),
    /// false for a script or decode fault (a bug: retrying will not help).
    pub fn is_connection(&self) -> bool {
        match self {
            EngineError::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
            }
            EngineError::Decode(_) => false,
        }
    }
}

/// Runs `op` and decodes its reply.
pub async fn run<O, C>(conn: &mut C, op: &O) -> Result<O::Reply, EngineError>
where
    O: Operation,
    C: ConnectionLike + Send,
{
    let value = invoke(conn, &op.invocation()).await?;
    Ok(op.decode(value)?)
}

/// EVALSHA, falling back to EVAL when the script is not cached yet (a new
/// or restarted Redis). EVAL also caches it for the next EVALSHA.
pub async fn invoke<C>(conn: &mut C, inv: &Invocation) -> Result<Value, redis::RedisError>
where
    C: ConnectionLike + Send,
{
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(inv.script.sha1())
        .arg(inv.keys.len())
        .arg(&inv.keys)
        .arg(&inv.args);
    match cmd.query_async::<redis::Value>(conn).await {
        Ok(v) => Ok(convert(v)),
        Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
            let mut eval = redis::cmd("EVAL");
            eval.arg(inv.script.source())
                .arg(inv.keys.len())
                .arg(&inv.keys)
                .arg(&inv.args);
            Ok(convert(eval.query_async::<redis::Value>(conn).await?))
        }
        Err(e) => Err(e),
    }
}

/// Adds `inv` to a pipeline as an EVALSHA (the script must be loaded:
/// run one call with [`run`] first, or SCRIPT LOAD). For bulk fills in
/// tests, benches and tools.
pub fn pipe_evalsha(pipe: &mut redis::Pipeline, inv: &Invocation) {
    pipe.cmd("EVALSHA")
        .arg(inv.script.sha1())
        .arg(inv.keys.len())
        .arg(&inv.keys)
        .arg(&inv.args);
}

/// redis-rs value → shared value. Lua replies only produce nil, integers,
/// bulk/status strings and arrays; the RESP3 kinds map to their nearest.
pub fn convert(v: redis::Value) -> Value {
    match v {
        redis::Value::Nil => Value::Nil,
        redis::Value::Int(n) => Value::Int(n),
        redis::Value::BulkString(b) => Value::Data(b),
        redis::Value::SimpleString(s) => Value::Data(s.into_bytes()),
        redis::Value::Okay => Value::Data(b"OK".to_vec()),
        redis::Value::Array(items) | redis::Value::Set(items) => {
            Value::Array(items.into_iter().map(convert).collect())
        }
        redis::Value::Boolean(b) => Value::Int(i64::from(b)),
        redis::Value::Double(d) => Value::Data(d.to_string().into_bytes()),
        redis::Value::VerbatimString { text, .. } => Value::Data(text.into_bytes()),
        _ => Value::Nil,
    }
}
