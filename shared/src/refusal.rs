//! Redis refusing a command it did not run: out of memory, busy with a
//! long script, loading its dataset, a read-only replica after a
//! fail-over, a replica cut off from its primary. The command changed
//! nothing, and the same command may succeed a moment later, so the
//! edge answers 503 with a `Retry-After` and the scheduler backs off;
//! both name the refusal (a log line; the scheduler's
//! `queuegate_redis_errors_total{kind}`) so the operator knows which of
//! these to fix. `NOSCRIPT` is not one: the caller sends the script's
//! text and goes on.

/// A refusal, by the error code Redis starts its reply with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// `OOM`: over `maxmemory` with a policy that does not evict.
    OutOfMemory,
    /// `BUSY`: a script (or function) has run past `busy-reply-threshold`.
    Busy,
    /// `LOADING`: the dataset is still being read from disk.
    Loading,
    /// `READONLY`: a replica (a fail-over moved the primary elsewhere).
    ReadOnly,
    /// `MASTERDOWN`: a replica that lost its primary and serves no data.
    MasterDown,
    /// `TRYAGAIN` / `CLUSTERDOWN`: a cluster moving slots, or without them.
    Cluster,
}

impl Refusal {
    /// The refusal an error code names (`OOM`, `BUSY`, …), if any.
    pub fn of_code(code: &str) -> Option<Refusal> {
        Some(match code {
            "OOM" => Refusal::OutOfMemory,
            "BUSY" => Refusal::Busy,
            "LOADING" => Refusal::Loading,
            "READONLY" => Refusal::ReadOnly,
            "MASTERDOWN" => Refusal::MasterDown,
            "TRYAGAIN" | "CLUSTERDOWN" => Refusal::Cluster,
            _ => return None,
        })
    }

    /// The refusal an error reply's text starts with (`OOM command not
    /// allowed …`), if any. A script's own error (`ERR …`) is none.
    pub fn of_message(message: &str) -> Option<Refusal> {
        let code = message.split_whitespace().next()?;
        Refusal::of_code(code.trim_start_matches('-'))
    }

    /// Its name in logs and in the metric's `kind` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::OutOfMemory => "oom",
            Refusal::Busy => "busy",
            Refusal::Loading => "loading",
            Refusal::ReadOnly => "readonly",
            Refusal::MasterDown => "masterdown",
            Refusal::Cluster => "cluster",
        }
    }

    /// What the operator should look at.
    pub fn advice(self) -> &'static str {
        match self {
            Refusal::OutOfMemory => {
                "Redis is over maxmemory and does not evict: raise maxmemory or free memory"
            }
            Refusal::Busy => "a script runs too long on Redis: SCRIPT KILL it, or wait for it",
            Refusal::Loading => "Redis is loading its dataset after a restart: wait",
            Refusal::ReadOnly => {
                "the Redis address leads to a read-only replica: after a fail-over, point it at the new primary"
            }
            Refusal::MasterDown => "the Redis replica lost its primary",
            Refusal::Cluster => "the Redis cluster is moving slots or down",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_replies_are_told_apart_by_their_code() {
        let cases = [
            (
                "OOM command not allowed when used memory > 'maxmemory'.",
                Some(Refusal::OutOfMemory),
            ),
            (
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
                Some(Refusal::Busy),
            ),
            (
                "LOADING Redis is loading the dataset in memory",
                Some(Refusal::Loading),
            ),
            (
                "READONLY You can't write against a read only replica.",
                Some(Refusal::ReadOnly),
            ),
            (
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
                Some(Refusal::MasterDown),
            ),
            ("TRYAGAIN Multiple keys request during rehashing of slot", Some(Refusal::Cluster)),
            ("CLUSTERDOWN The cluster is down", Some(Refusal::Cluster)),
            ("-OOM command not allowed", Some(Refusal::OutOfMemory)),
            // Not refusals: a script's own error, a missing script, a
            // plan limit (its own case at the edge), nothing.
            ("ERR user_script:1: bad argument", None),
            ("NOSCRIPT No matching script.", None),
            ("ERR max requests limit exceeded", None),
            ("WRONGTYPE Operation against a key", None),
            ("", None),
            ("OOMish", None),
        ];
        for (message, want) in cases {
            assert_eq!(Refusal::of_message(message), want, "{message:?}");
        }
        assert_eq!(Refusal::of_code("READONLY"), Some(Refusal::ReadOnly));
        assert_eq!(Refusal::OutOfMemory.to_string(), "oom");
    }
}
