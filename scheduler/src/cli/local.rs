//! The commands that touch no queue: the config (found, loaded and
//! reported by `check`), `healthcheck` of a running scheduler, and
//! `admin-token`.

use std::path::PathBuf;

use super::CliError;
use crate::config::{self, Config};
use crate::connect;

/// Prints a new admin token and the line that lets the config accept it.
pub(super) fn admin_token(name: &str) -> Result<(), CliError> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if !valid {
        return Err(CliError::Usage(
            "a token's name is 1-64 of A-Z a-z 0-9 _ . -".into(),
        ));
    }
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| CliError::Usage(format!("no randomness from the OS: {e}")))?;
    let token = format!("qga_{}", hex::encode(bytes));
    println!("token (give it to {name}; it is not kept anywhere):\n  {token}");
    println!("add to the [admin] section of the config (the hash only):");
    println!("  tokens.{name} = \"{}\"", config::token_hash(&token));
    Ok(())
}

/// `check`: the config as understood, each queue's effective settings.
pub(super) fn check_report(config: &Config) -> String {
    let mut out = format!(
        "{}: ok\nredis   {}\nlisten  {}\n",
        config.origin,
        connect::describe(&config.redis.endpoint),
        config.listen
    );
    for q in &config.queues {
        out.push_str(&format!("\n[[queue]] id = \"{}\"\n", q.id));
        for (name, value) in q.settings.to_fields() {
            out.push_str(&format!("{name} = {value}\n"));
        }
        for (name, at) in [
            ("opens_at", q.schedule.opens_at),
            ("closes_at", q.schedule.closes_at),
        ] {
            if let Some(at) = at {
                out.push_str(&format!("{name} = {}\n", config::format_time(at)));
            }
        }
    }
    out.push_str(
        "\n(the file's settings; run-time settings kept in Redis win over them: \
         `settings QUEUE` shows what is in force)\n",
    );
    out
}

/// `healthcheck`: GET /healthz of the scheduler listening at `listen` (an
/// unspecified address is asked on loopback), within 3 s.
pub(super) fn healthcheck(listen: std::net::SocketAddr) -> Result<(), CliError> {
    use std::io::{Read, Write};
    let mut addr = listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let limit = std::time::Duration::from_secs(3);
    let ask = || -> std::io::Result<Vec<u8>> {
        let mut s = std::net::TcpStream::connect_timeout(&addr, limit)?;
        s.set_read_timeout(Some(limit))?;
        s.set_write_timeout(Some(limit))?;
        s.write_all(b"GET /healthz HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply)?;
        Ok(reply)
    };
    let reply = ask().map_err(|e| CliError::Refused(format!("cannot ask {addr}: {e}")))?;
    let head = String::from_utf8_lossy(&reply);
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        println!("healthy");
        Ok(())
    } else {
        Err(CliError::Refused(format!("{addr}/healthz: {status}")))
    }
}

/// The config: the file named (`--config`, `QUEUEGATE_CONFIG`), else the
/// default file if it exists, else the environment alone when it names
/// Redis. With a file, queue settings in the environment are refused
/// (they would be ignored). Returns the file to reload on SIGHUP.
pub(super) fn load_config(named: Option<PathBuf>) -> Result<(Config, Option<PathBuf>), CliError> {
    // Checked first: a misspelt variable is refused whatever the source.
    let environment = config::Environment::from_process()?;
    let env = |k: &str| environment.get(k);
    let default = PathBuf::from(config::DEFAULT_PATH);
    let file = match named {
        Some(path) => Some(path),
        None if default.exists() => Some(default),
        None => None,
    };
    match file {
        Some(path) => {
            Config::refuse_env_settings(&path.display().to_string(), env)?;
            Ok((Config::load(&path, &environment)?, Some(path)))
        }
        None if env(config::env::REDIS_URL).is_some()
            || env(config::env::REDIS_NODES).is_some() =>
        {
            Ok((Config::from_env(env)?, None))
        }
        None => Err(CliError::Usage(format!(
            "no config: give --config FILE (or QUEUEGATE_CONFIG), put one at {}, or set \
             QUEUEGATE_REDIS_URL to configure from the environment alone (docs/scheduler.md)",
            config::DEFAULT_PATH
        ))),
    }
}
