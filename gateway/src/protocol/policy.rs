//! Commands the gateway refuses: every client shares one multiplexed Redis
//! connection, so a command that changes connection state (SELECT,
//! SUBSCRIBE, MULTI) or blocks it (BLPOP) would break or stall everyone.

use super::Command;

/// Commands that change the state of the shared connection. Transactions
/// go through `/multi-exec`, which sends MULTI … EXEC as one unit.
const CONNECTION_STATE: &[&str] = &[
    "AUTH",
    "DISCARD",
    "EXEC",
    "HELLO",
    "MONITOR",
    "MULTI",
    "PSUBSCRIBE",
    "PUNSUBSCRIBE",
    "QUIT",
    "RESET",
    "SELECT",
    "SSUBSCRIBE",
    "SUBSCRIBE",
    "SUNSUBSCRIBE",
    "SYNC",
    "PSYNC",
    "UNSUBSCRIBE",
    "UNWATCH",
    "WATCH",
];

/// Commands that hold the shared connection until they return.
const BLOCKING: &[&str] = &[
    "BLMOVE",
    "BLMPOP",
    "BLPOP",
    "BRPOP",
    "BRPOPLPUSH",
    "BZMPOP",
    "BZPOPMAX",
    "BZPOPMIN",
    "WAIT",
    "WAITAOF",
];

/// Why `command` is refused, or None when it may run.
pub fn refusal(command: &Command) -> Option<String> {
    let name = command.name();
    let why = if CONNECTION_STATE.contains(&name.as_str()) {
        "changes the state of the connection all clients share"
    } else if BLOCKING.contains(&name.as_str()) || blocking_stream_read(&name, command) {
        "would block the connection all clients share"
    } else if name == "CLIENT" && first_arg_is(command, &["REPLY", "PAUSE", "KILL"]) {
        "would affect the connection all clients share"
    } else {
        return None;
    };
    Some(format!(
        "command '{}' is not supported by redis-rest: it {why}",
        name.to_ascii_lowercase()
    ))
}

/// XREAD / XREADGROUP with a BLOCK option.
fn blocking_stream_read(name: &str, command: &Command) -> bool {
    (name == "XREAD" || name == "XREADGROUP")
        && command
            .args()
            .iter()
            .any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
}

fn first_arg_is(command: &Command, words: &[&str]) -> bool {
    command
        .args()
        .first()
        .is_some_and(|a| words.iter().any(|w| a.eq_ignore_ascii_case(w.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(words: &[&str]) -> Command {
        Command::new(words.iter().map(|w| w.as_bytes().to_vec()).collect()).unwrap()
    }

    #[test]
    fn refuses_state_and_blocking_commands() {
        for words in [
            &["subscribe", "c"][..],
            &["MULTI"],
            &["select", "1"],
            &["blpop", "l", "0"],
            &["xread", "block", "0", "streams", "s", "$"],
            &["client", "reply", "off"],
        ] {
            assert!(refusal(&cmd(words)).is_some(), "{words:?}");
        }
    }

    #[test]
    fn allows_ordinary_commands() {
        for words in [
            &["get", "k"][..],
            &["evalsha", "abc", "0"],
            &["xread", "streams", "s", "0"],
            &["client", "list"],
            &["lpop", "l"],
        ] {
            assert!(refusal(&cmd(words)).is_none(), "{words:?}");
        }
    }
}
