//! The Redis side: one multiplexed connection (redis-rs `ConnectionManager`)
//! shared by every request, reconnecting on its own when Redis comes back,
//! with every round trip bounded so a down Redis answers fast instead of
//! hanging the client.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Value;

use crate::error::{GatewayError, StartError};
use crate::protocol::Command;

/// What EXEC answered for a `/multi-exec` batch.
#[derive(Debug)]
pub enum Transaction {
    /// EXEC ran: one reply per command (runtime errors are error replies).
    Ran(Vec<Value>),
    /// Redis discarded the whole transaction (EXECABORT, or a MULTI error).
    Rejected(Value),
}

/// A cheap-to-clone handle on the shared connection.
#[derive(Clone)]
pub struct Backend {
    conn: ConnectionManager,
    timeout: Duration,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// Sets up the connection without connecting: the gateway starts (and
    /// answers 503) while Redis is down and connects on the first request.
    pub fn connect_lazy(redis_url: &str, timeout: Duration) -> Result<Backend, StartError> {
        let client = redis::Client::open(redis_url)?;
        // Few, short retries: the request timeout is the real bound, and a
        // failed reconnect is retried by the next request anyway. The
        // client's own response timeout (500 ms unless set) is put a second
        // past that bound, so the bound answers (504): left alone it cut
        // every call at 500 ms (503) whatever `--redis-timeout-ms` said.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout.min(Duration::from_secs(1))))
            .set_response_timeout(Some(timeout + Duration::from_secs(1)))
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Backend { conn, timeout })
    }

    /// One command; an error reply comes back as `Value::ServerError`.
    pub async fn command(&self, command: &Command) -> Result<Value, GatewayError> {
        let mut conn = self.conn.clone();
        let cmd = command.to_cmd();
        self.bounded(async move { conn.send_packed_command(&cmd).await })
            .await
    }

    /// Commands in order in one round trip, one reply each.
    pub async fn pipeline(&self, commands: &[Command]) -> Result<Vec<Value>, GatewayError> {
        let mut pipe = redis::pipe();
        for c in commands {
            pipe.add_command(c.to_cmd());
        }
        let mut conn = self.conn.clone();
        let count = commands.len();
        let replies = self
            .bounded(async move { conn.send_packed_commands(&pipe, 0, count).await })
            .await?;
        expect_len(replies, count)
    }

    /// MULTI, the commands, EXEC as one write on the shared connection (the
    /// multiplexer never interleaves another request inside it), so the
    /// batch runs atomically.
    pub async fn transaction(&self, commands: &[Command]) -> Result<Transaction, GatewayError> {
        let mut pipe = redis::pipe();
        pipe.add_command(redis::cmd("MULTI"));
        for c in commands {
            pipe.add_command(c.to_cmd());
        }
        pipe.add_command(redis::cmd("EXEC"));
        let count = commands.len() + 2;
        let mut conn = self.conn.clone();
        let mut replies = self
            .bounded(async move { conn.send_packed_commands(&pipe, 0, count).await })
            .await?;
        replies = expect_len(replies, count)?;
        let exec = replies.pop().unwrap_or(Value::Nil);
        if let Some(err @ Value::ServerError(_)) = replies.first() {
            return Ok(Transaction::Rejected(err.clone()));
        }
        match exec {
            Value::Array(results) if results.len() == commands.len() => {
                Ok(Transaction::Ran(results))
            }
            rejected @ Value::ServerError(_) => Ok(Transaction::Rejected(rejected)),
            other => Err(GatewayError::Internal(format!(
                "unexpected EXEC reply: {}",
                kind(&other)
            ))),
        }
    }

    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, GatewayError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result.map_err(GatewayError::from_redis),
            Err(_) => Err(GatewayError::Timeout(self.timeout)),
        }
    }
}

fn expect_len(replies: Vec<Value>, count: usize) -> Result<Vec<Value>, GatewayError> {
    if replies.len() == count {
        Ok(replies)
    } else {
        Err(GatewayError::Internal(format!(
            "expected {count} replies, got {}",
            replies.len()
        )))
    }
}

/// The kind of a reply, for error messages that must not echo values.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Int(_) => "integer",
        Value::Array(_) => "array",
        Value::ServerError(_) => "error",
        _ => "other",
    }
}
