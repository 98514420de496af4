//! The command line: `run` the service, or an operator command that reads
//! or switches one queue. Each error maps to an exit code: 2 for usage and
//! config mistakes, 1 for runtime failures such as Redis being unreachable.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use queuegate_shared::fields::stats as sf;
use queuegate_shared::ops::Change;

use crate::actions::{self, ActionError, QueueStatus, Switch};
use crate::audit;
use crate::config::{self, Config, ConfigError};
use crate::connect::{self, ConnectError, Patience};
use crate::engine::EngineError;
use crate::service::{self, RunError};

/// queuegate's admission scheduler and its operator commands.
#[derive(Debug, Parser)]
#[command(name = "queuegate-scheduler", version, about, long_about = None)]
pub struct Cli {
    /// The TOML config file [default: /etc/queuegate/scheduler.toml if it
    /// exists, else the environment alone (QUEUEGATE_REDIS_URL, …)].
    #[arg(long, short, global = true, env = config::env::CONFIG)]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scheduler until SIGTERM or ctrl-c.
    Run,
    /// Show waiting, active slots, admitted/s and the lease holder.
    Status {
        /// One queue (default: every configured queue).
        queue: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Stop admitting; visitors can still enter.
    Pause {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
    },
    /// Admit again after `pause` (refused unless the queue is paused).
    Resume {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
    },
    /// Refuse new visitors and stop admitting.
    Close {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
    },
    /// Accept visitors and admit, whatever the queue's state was.
    Open {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
    },
    /// Refuse new visitors but admit the line until it is empty.
    Drain {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
    },
    /// Set or clear the scheduled opening and closing (RFC 3339 times with
    /// an offset, e.g. 2026-12-03T14:00:00Z). Before the opening new
    /// visitors join a pre-queue whose places are drawn at random at the
    /// opening; from the closing no new visitors are taken (the line
    /// drains). Clearing the opening of a waiting pre-queue opens it now.
    Schedule {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// When the queue opens.
        #[arg(long, value_name = "RFC3339")]
        opens_at: Option<String>,
        /// When the queue stops taking new visitors.
        #[arg(long, value_name = "RFC3339")]
        closes_at: Option<String>,
        /// Remove both.
        #[arg(long, conflicts_with_all = ["opens_at", "closes_at"])]
        clear: bool,
    },
    /// Set or clear a short notice to the line ("sizes S and M are sold
    /// out"): one line of plain text, at most 280 characters, shown on the
    /// waiting-room page and in every state reply within seconds (the
    /// edge reads it with its snapshot), without a redeploy.
    Notice {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// The notice.
        #[arg(long, value_name = "TEXT", required_unless_present = "clear")]
        set: Option<String>,
        /// Remove the notice.
        #[arg(long, conflicts_with = "set")]
        clear: bool,
    },
    /// Empty a closed queue for a rehearsal: its line, pre-queue,
    /// statistics, visitors' statuses and tokens (settings, state,
    /// schedule, notice and bypass links stay). Refused unless the queue is closed, and
    /// while admitted visitors hold slots unless --force.
    Reset {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Reset even while admitted visitors hold slots (their tokens stop
        /// working).
        #[arg(long)]
        force: bool,
    },
    /// Bypass links for staff and QA: a link passes the queue's gate
    /// without queueing until it expires or is revoked (the origin still
    /// gets signed requests).
    Bypass {
        /// What to do.
        #[command(subcommand)]
        action: BypassCommand,
    },
    /// Look a visitor up: where they stand, their token's window (never
    /// the token), their status changes. With --revoke: end their place
    /// or token and keep them out; with --lift: let them in again.
    Visitor {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// The visitor's id (the origin gets it as X-Queuegate-User). An
        /// anonymous id is base64url, so it may begin with `-`.
        #[arg(long, allow_hyphen_values = true)]
        id: String,
        /// Revoke: a place in line is removed, a token deleted and its
        /// slot freed; the page shows "revoked" and the visitor cannot
        /// enter again until the revocation ends.
        #[arg(long, conflicts_with = "lift")]
        revoke: bool,
        /// How long --revoke keeps the visitor out, in minutes (1 to
        /// 10080; default: the queue's status_ttl_ms).
        #[arg(long, requires = "revoke")]
        minutes: Option<u64>,
        /// End a revocation: the visitor may enter again, anew.
        #[arg(long)]
        lift: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show or change a queue's settings at run time: kept in Redis, they
    /// win over the config file's and are in force at the lease holder's
    /// next tick (docs/scheduler.md, "Settings at run time").
    Settings {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Set a setting, as in the config file: `--set admit_rate_per_second=50`
        /// (repeatable).
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Remove a run-time setting: the file's value is in force again
        /// (repeatable).
        #[arg(long = "unset", value_name = "NAME")]
        unset: Vec<String>,
        /// Remove every run-time setting.
        #[arg(long, conflicts_with_all = ["set", "unset"])]
        clear: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate the config and print each queue's effective settings.
    Check,
    /// Ask this host's running scheduler (`[http] listen`) whether every
    /// queue reaches Redis: exit 0 when its `/healthz` answers 200 (a
    /// container's health check; no curl needed).
    Healthcheck,
    /// Make a token for the admin API: prints the token once and the
    /// config line holding its hash (the config never holds the token).
    AdminToken {
        /// Who will use it (shown in the audit log and the metrics).
        name: String,
    },
}

/// `bypass` subcommands.
#[derive(Debug, Subcommand)]
pub enum BypassCommand {
    /// Mint a link: prints its key once (only its hash is kept).
    Create {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Who it is for (shown in lists and the audit log).
        #[arg(long)]
        name: String,
        /// How long it lives, in minutes (1 to 10080).
        #[arg(long, default_value_t = 120)]
        minutes: u64,
    },
    /// List the queue's links: live, revoked, expired within a day.
    List {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// End a link now.
    Revoke {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Its id, as `bypass list` shows it.
        #[arg(long, allow_hyphen_values = true)]
        id: String,
    },
}

/// A failed command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The config file is missing or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The command line names something the config does not have.
    #[error("{0}")]
    Usage(String),
    /// Redis could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Redis answered with an error.
    #[error("redis: {0}")]
    Redis(#[from] EngineError),
    /// The service stopped on its own.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The queue is not in a state the command applies to.
    #[error("{0}")]
    Refused(String),
}

impl From<ActionError> for CliError {
    fn from(e: ActionError) -> Self {
        match e {
            ActionError::BadInput(m) | ActionError::UnknownQueue(m) | ActionError::Conflict(m) => {
                CliError::Usage(m)
            }
            ActionError::UnknownBypass(m) => CliError::Refused(m),
            ActionError::Refused(m) => CliError::Refused(m),
            ActionError::Redis(e) => CliError::Redis(e),
        }
    }
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Config(_) | CliError::Usage(_) => 2,
            _ => 1,
        }
    }
}

/// Runs the parsed command; `shutdown` stops `run`.
pub async fn execute(
    cli: Cli,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), CliError> {
    if let Command::AdminToken { name } = &cli.command {
        return admin_token(name);
    }
    let (config, file) = load_config(cli.config)?;
    let (queue, action) = match cli.command {
        Command::Run => return Ok(service::run_reloading(config, file, shutdown).await?),
        Command::Check => {
            print!("{}", check_report(&config));
            return Ok(());
        }
        Command::Healthcheck => return healthcheck(config.listen),
        Command::AdminToken { .. } => unreachable!("handled above"),
        Command::Settings {
            queue,
            set,
            unset,
            clear,
            json,
        } => return settings(&config, queue.as_deref(), &set, &unset, clear, json).await,
        Command::Status { queue, json } => return status(&config, queue.as_deref(), json).await,
        Command::Schedule {
            queue,
            opens_at,
            closes_at,
            clear,
        } => {
            let change = actions::schedule_change(
                opens_at.as_deref(),
                closes_at.as_deref(),
                clear,
                actions::FLAGS,
            )?;
            (queue, Action::Schedule(change))
        }
        Command::Notice { queue, set, .. } => {
            if let Some(text) = &set {
                queuegate_shared::notice::check(text)
                    .map_err(|e| CliError::Usage(format!("--set: {e}")))?;
            }
            (queue, Action::Notice(set))
        }
        Command::Reset { queue, force } => (queue, Action::Reset(force)),
        Command::Bypass { action } => return bypass(&config, action).await,
        Command::Visitor {
            queue,
            id,
            revoke,
            minutes,
            lift,
            json,
        } => {
            let queue = actions::pick(&config, queue.as_deref())?.id.to_string();
            let mut conn = connect::open(&config.redis, Patience::Once).await?;
            let who = audit::cli_user();
            if revoke {
                let done =
                    actions::visitor_revoke(&config, &mut conn, Some(&queue), &id, minutes).await;
                audit::record(None, &who, "visitor_revoke", &queue, &done);
                let r = done?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
                } else {
                    println!(
                        "visitor {} of queue {} revoked (was {}); kept out for {}",
                        r.user,
                        r.queue,
                        r.was,
                        minutes_text(r.for_ms)
                    );
                }
                return Ok(());
            }
            if lift {
                let done = actions::visitor_lift(&config, &mut conn, Some(&queue), &id).await;
                audit::record(None, &who, "visitor_lift", &queue, &done);
                done?;
                println!("visitor {id} of queue {queue}: revocation lifted; they may enter again");
                return Ok(());
            }
            let done = actions::visitor(&config, &mut conn, Some(&queue), &id).await;
            audit::record(None, &audit::cli_user(), "visitor", &queue, &done);
            let v = done?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            } else {
                print!("{}", render_visitor(&v));
            }
            return Ok(());
        }
        Command::Pause { queue } => (queue, Action::Switch(Switch::Pause)),
        Command::Resume { queue } => (queue, Action::Switch(Switch::Resume)),
        Command::Close { queue } => (queue, Action::Switch(Switch::Close)),
        Command::Open { queue } => (queue, Action::Switch(Switch::Open)),
        Command::Drain { queue } => (queue, Action::Switch(Switch::Drain)),
    };
    let queue = actions::pick(&config, queue.as_deref())?.id.to_string();
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let who = audit::cli_user();
    let done = match action {
        Action::Switch(switch) => {
            let done = actions::switch(&config, &mut conn, Some(&queue), switch).await;
            audit::record(None, &who, switch.name(), &queue, &done);
            done.map(|s| {
                if s.changed {
                    println!("queue {}: {} (was {})", s.queue, s.state, s.previous);
                } else {
                    println!("queue {}: already {}", s.queue, s.state);
                }
            })
        }
        Action::Schedule(change) => {
            let done = actions::schedule(&config, &mut conn, Some(&queue), change).await;
            audit::record(None, &who, "schedule", &queue, &done);
            done.map(|now| {
                let show = |t: &Option<String>| t.clone().unwrap_or_else(|| "none".into());
                println!(
                    "queue {}: opens at {} · closes at {}",
                    now.queue,
                    show(&now.opens_at),
                    show(&now.closes_at)
                );
                if let Some(w) = now.warning {
                    eprintln!("warning: {w}");
                }
            })
        }
        Action::Reset(force) => {
            let done = actions::reset(&config, &mut conn, Some(&queue), force).await;
            let action = if force { "reset_forced" } else { "reset" };
            audit::record(None, &who, action, &queue, &done);
            done.map(|r| {
                println!(
                    "queue {}: reset, {} keys removed{}",
                    r.queue,
                    r.removed_keys,
                    if r.tokens_dropped > 0 {
                        format!(", {} tokens in flight dropped", r.tokens_dropped)
                    } else {
                        String::new()
                    }
                );
            })
        }
        Action::Notice(text) => {
            let done = actions::notice(&config, &mut conn, Some(&queue), text.as_deref()).await;
            audit::record(None, &who, "notice", &queue, &done);
            done.map(|now| {
                let was = now
                    .previous
                    .map_or("none".to_string(), |p| format!("{p:?}"));
                match now.notice {
                    Some(t) => println!("queue {}: notice {t:?} (was {was})", now.queue),
                    None => println!("queue {}: notice cleared (was {was})", now.queue),
                }
            })
        }
    };
    Ok(done?)
}

async fn bypass(config: &Config, action: BypassCommand) -> Result<(), CliError> {
    let who = audit::cli_user();
    match action {
        BypassCommand::Create {
            queue,
            name,
            minutes,
        } => {
            let queue = actions::pick(config, queue.as_deref())?.id.to_string();
            let mut conn = connect::open(&config.redis, Patience::Once).await?;
            let done =
                actions::bypass_create(config, &mut conn, Some(&queue), &name, minutes).await;
            audit::record(None, &who, "bypass_create", &queue, &done);
            let b = done?;
            println!(
                "bypass {} for {:?} on queue {}, until {}",
                b.id, b.name, b.queue, b.expires_at
            );
            println!("open on the shop's site (shown once; only its hash is kept):");
            println!("  {}", b.link);
        }
        BypassCommand::List { queue, json } => {
            let queue = actions::pick(config, queue.as_deref())?.id.to_string();
            let mut conn = connect::open(&config.redis, Patience::Once).await?;
            let all = actions::bypass_list(config, &mut conn, Some(&queue)).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&all).unwrap_or_default());
            } else if all.is_empty() {
                println!("queue {queue}: no bypass links");
            } else {
                for b in &all {
                    println!(
                        "{}  {:<8} {:>6} uses  until {}  {}",
                        b.id, b.status, b.uses, b.expires_at, b.name
                    );
                }
            }
        }
        BypassCommand::Revoke { queue, id } => {
            let queue = actions::pick(config, queue.as_deref())?.id.to_string();
            let mut conn = connect::open(&config.redis, Patience::Once).await?;
            let done = actions::bypass_revoke(config, &mut conn, Some(&queue), &id).await;
            audit::record(None, &who, "bypass_revoke", &queue, &done);
            let r = done?;
            println!("queue {}: bypass {} ({:?}) revoked", r.queue, r.id, r.name);
        }
    }
    Ok(())
}

/// A change an operator command makes.
enum Action {
    Switch(Switch),
    Schedule((Change, Change)),
    Notice(Option<String>),
    Reset(bool),
}

/// Prints a new admin token and the line that lets the config accept it.
fn admin_token(name: &str) -> Result<(), CliError> {
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

fn check_report(config: &Config) -> String {
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

async fn status(config: &Config, queue: Option<&str>, json: bool) -> Result<(), CliError> {
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let all = actions::status(config, &mut conn, queue).await?;
    if json {
        let text = serde_json::to_string_pretty(&all).unwrap_or_default();
        println!("{text}");
        return Ok(());
    }
    for s in &all {
        print!("{}", render(s));
    }
    Ok(())
}

fn render(s: &QueueStatus) -> String {
    let stat = |k: &str| s.stats.get(k).copied().unwrap_or(0);
    let max = s.max_active.map_or("?".to_string(), |m| m.to_string());
    let rate = s
        .admitted_per_second
        .map_or("no measurement yet".to_string(), |r| format!("{r:.1}"));
    let lease = match (&s.lease_holder, s.lease_ttl_ms) {
        (Some(h), Some(ttl)) => format!("{h} (expires in {:.1} s)", ttl as f64 / 1000.0),
        _ => "none: no scheduler holds this queue".to_string(),
    };
    let none = || "none".to_string();
    format!(
        "queue {}\n  state       {}\n  schedule    opens {} · closes {}\n  pre-queue   {} (drawing: {} left)\n  waiting     {}\n  active      {} / {max}\n  admitted/s  {rate}\n  lease       {lease}\n  origin      {}\n  totals      entered {} · admitted {} (passed at once {}) · abandoned {} · expired {} · ordered {} · lapsed {}\n  refused     budget {} · no challenge {} · reused {} · stale {} · turnstile {}\n",
        s.queue,
        s.state.as_deref().unwrap_or("unconfigured (no scheduler has published settings)"),
        s.opens_at.clone().unwrap_or_else(none),
        s.closes_at.clone().unwrap_or_else(none),
        s.pre_queued,
        s.drawing,
        s.waiting,
        s.active,
        s.origin.line(),
        stat(sf::ENTERED),
        stat(sf::ADMITTED),
        stat(sf::PASSED),
        stat(sf::ABANDONED),
        stat(sf::EXPIRED),
        stat(sf::ORDERED),
        stat(sf::LAPSED),
        stat(sf::REFUSED_BUDGET),
        stat(sf::REFUSED_CHALLENGE),
        stat(sf::REFUSED_REUSED),
        stat(sf::REFUSED_STALE),
        stat(sf::REFUSED_TURNSTILE),
    ) + &bypassed(s) + &s
        .notice
        .as_ref()
        .map_or(String::new(), |n| format!("  notice      {n:?}\n"))
}

fn render_visitor(v: &actions::VisitorView) -> String {
    let mut out = format!(
        "visitor {} in queue {}\n  state       {}\n",
        v.user, v.queue, v.state
    );
    if let (Some(p), Some(t)) = (v.position, v.ticket) {
        out.push_str(&format!("  position    {p} (ticket {t})\n"));
    }
    if let Some(until) = &v.slot_until {
        out.push_str(&format!("  slot        held until {until}\n"));
    }
    if let Some(t) = &v.token {
        out.push_str(&format!(
            "  token       usable {} to {} (restored {}×)\n",
            t.activates_at, t.expires_at, t.restores
        ));
    }
    if let Some(c) = &v.last_change {
        out.push_str(&format!("  last change {} at {}\n", c.status, c.at));
    }
    for (i, c) in v.history.iter().enumerate() {
        let label = if i == 0 { "history" } else { "" };
        out.push_str(&format!("  {label:<11} {} at {}\n", c.status, c.at));
    }
    out
}

/// `healthcheck`: GET /healthz of the scheduler listening at `listen` (an
/// unspecified address is asked on loopback), within 3 s.
fn healthcheck(listen: std::net::SocketAddr) -> Result<(), CliError> {
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
fn load_config(named: Option<PathBuf>) -> Result<(Config, Option<PathBuf>), CliError> {
    let env = |k: &str| std::env::var(k).ok();
    let default = PathBuf::from(config::DEFAULT_PATH);
    let file = match named {
        Some(path) => Some(path),
        None if default.exists() => Some(default),
        None => None,
    };
    match file {
        Some(path) => {
            Config::refuse_env_settings(&path.display().to_string(), env)?;
            Ok((Config::load(&path)?, Some(path)))
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

/// `settings`: shows them, or changes them (`--set`, `--unset`, `--clear`).
async fn settings(
    config: &Config,
    queue: Option<&str>,
    set: &[String],
    unset: &[String],
    clear: bool,
    json: bool,
) -> Result<(), CliError> {
    let mut changes = crate::runtime::Values::new();
    for pair in set {
        let (name, value) = pair.split_once('=').ok_or_else(|| {
            CliError::Usage(format!(
                "--set {pair}: write NAME=VALUE, e.g. admit_rate_per_second=50"
            ))
        })?;
        let parsed: toml::Table =
            toml::from_str(&format!("v = {}", value.trim())).map_err(|_| {
                CliError::Usage(format!(
                    "--set {pair}: {value:?} is not a number or true/false"
                ))
            })?;
        let value = serde_json::to_value(&parsed["v"])
            .map_err(|e| CliError::Usage(format!("--set {pair}: {e}")))?;
        changes.insert(name.trim().to_string(), value);
    }
    for name in unset {
        changes.insert(name.trim().to_string(), serde_json::Value::Null);
    }
    let queue = actions::pick(config, queue)?.id.to_string();
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let who = audit::cli_user();
    let view = if clear {
        let done = actions::settings_clear(config, &mut conn, Some(&queue)).await;
        audit::record(None, &who, "settings_clear", &queue, &done);
        done?
    } else if changes.is_empty() {
        actions::settings_show(config, &mut conn, Some(&queue)).await?
    } else {
        let done = actions::settings_change(config, &mut conn, Some(&queue), &changes).await;
        let asked = serde_json::Value::Object(changes).to_string();
        audit::record_changes(None, &who, "settings_change", &queue, &asked, &done);
        done?
    };
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&view).unwrap_or_default()
        );
    } else {
        print!("{}", render_settings(&view));
    }
    Ok(())
}

fn render_settings(v: &actions::SettingsView) -> String {
    let applied = match v.applied_version {
        Some(a) if a == v.version => "in force".to_string(),
        Some(a) => format!("the lease holder applied version {a} so far"),
        None if v.version == 0 => "none set".to_string(),
        None => "not applied by a lease holder yet".to_string(),
    };
    let mut out = format!(
        "queue {} settings (run-time version {}: {applied})\n",
        v.queue, v.version
    );
    let effective = serde_json::to_value(&v.effective).unwrap_or_default();
    let file = serde_json::to_value(&v.file).unwrap_or_default();
    for (name, value) in effective.as_object().into_iter().flatten() {
        let from = if v.runtime.contains_key(name) {
            format!("run time (file: {})", file[name])
        } else {
            "file".to_string()
        };
        out.push_str(&format!("  {name:<32} {value:<12} {from}\n"));
    }
    out
}

/// `90 min`, `1.5 s`: a duration for people.
fn minutes_text(ms: u64) -> String {
    if ms.is_multiple_of(60_000) {
        format!("{} min", ms / 60_000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// `  bypassed    N requests` when bypass links passed any, and
/// `  revoked     N visitors` when operators revoked any.
fn bypassed(s: &QueueStatus) -> String {
    let mut out = String::new();
    if let Some(n) = s.stats.get(sf::BYPASSED).copied().filter(|n| *n > 0) {
        out.push_str(&format!("  bypassed    {n} requests (bypass links)\n"));
    }
    if let Some(n) = s.stats.get(sf::REVOKED).copied().filter(|n| *n > 0) {
        let withdrawn = s.stats.get(sf::WITHDRAWN).copied().unwrap_or(0);
        out.push_str(&format!(
            "  revoked     {n} visitors ({withdrawn} places withdrawn)\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::{pick, schedule_change, OriginStatus, FLAGS};
    use clap::CommandFactory;
    use std::collections::BTreeMap;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from(["qs", "--config", "x.toml", "status", "main"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Status {
                queue: Some(_),
                json: false
            }
        ));
        assert!(Cli::try_parse_from(["qs", "frobnicate"]).is_err());
        // An anonymous visitor id is base64url: one in 64 begins with `-`.
        let cli =
            Cli::try_parse_from(["qs", "visitor", "main", "--id", "-Fq3", "--revoke"]).unwrap();
        assert!(
            matches!(cli.command, Command::Visitor { ref id, revoke: true, .. } if id == "-Fq3"),
            "{cli:?}"
        );
        assert!(
            Cli::try_parse_from(["qs", "schedule", "--clear", "--opens-at", "x"]).is_err(),
            "--clear takes nothing else"
        );
    }

    #[test]
    fn schedule_times_are_rfc3339_and_in_order() {
        let at = |t: &str| config::parse_time(t).unwrap();
        assert_eq!(
            schedule_change(Some("2026-12-03T14:00:00Z"), None, false, FLAGS).unwrap(),
            (Change::Set(at("2026-12-03T14:00:00Z")), Change::Keep)
        );
        assert_eq!(
            at("2026-12-03T15:00:00+01:00"),
            at("2026-12-03T14:00:00Z"),
            "offsets count"
        );
        assert_eq!(
            schedule_change(None, None, true, FLAGS).unwrap(),
            (Change::Clear, Change::Clear)
        );
        for (open, close) in [
            (None, None),
            (Some("tomorrow"), None),
            (Some("2026-12-03T14:00:00"), None),
            (Some("2026-12-03T14:00:00Z"), Some("2026-12-03T13:00:00Z")),
        ] {
            let err = CliError::from(schedule_change(open, close, false, FLAGS).unwrap_err());
            assert_eq!(err.exit_code(), 2, "{err}");
        }
        assert_eq!(
            config::format_time(at("2026-12-03T14:00:00Z")),
            "2026-12-03T14:00:00Z"
        );
    }

    #[test]
    fn queue_is_optional_only_with_one_configured() {
        let one = Config::parse("[[queue]]\nid = \"main\"\n", "t", |_| None).unwrap();
        assert_eq!(pick(&one, None).unwrap().id.as_str(), "main");
        let err = CliError::from(pick(&one, Some("other")).unwrap_err());
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("configured: main"), "{err}");
        let two = Config::parse(
            "[[queue]]\nid = \"a\"\n[[queue]]\nid = \"b\"\n",
            "t",
            |_| None,
        )
        .unwrap();
        assert!(pick(&two, None).is_err());
    }

    #[test]
    fn status_reads_like_a_report() {
        let s = QueueStatus {
            queue: "main".into(),
            state: Some("open".into()),
            waiting: 1204,
            active: 56,
            max_active: Some(1000),
            admitted_per_second: Some(174.96),
            lease_holder: Some("vm1/42/ab12cd34".into()),
            lease_ttl_ms: Some(1800),
            opens_at: Some("2026-12-03T14:00:00Z".into()),
            closes_at: None,
            pre_queued: 0,
            drawing: 0,
            origin: OriginStatus::of(&BTreeMap::from([
                ("target_rate".into(), "87.500".into()),
                ("admit_rate_per_second".into(), "175.0".into()),
                ("min_admit_rate_per_second".into(), "1.0".into()),
                ("origin_error_share".into(), "0.420".into()),
                ("origin_p95_ms".into(), "120.000".into()),
            ])),
            stats: BTreeMap::from([("entered".into(), 5000), ("admitted".into(), 3796)]),
            notice: Some("S and M sold out".into()),
        };
        let text = render(&s);
        assert!(
            text.ends_with("  notice      \"S and M sold out\"\n"),
            "{text}"
        );
        assert!(text.contains("active      56 / 1000"), "{text}");
        assert!(text.contains("admitted/s  175.0"), "{text}");
        assert!(
            text.contains("vm1/42/ab12cd34 (expires in 1.8 s)"),
            "{text}"
        );
        assert!(text.contains("entered 5000 · admitted 3796"), "{text}");
        assert!(
            text.contains("schedule    opens 2026-12-03T14:00:00Z · closes none"),
            "{text}"
        );
        assert!(
            text.contains(
                "origin      target 87.5/s (min 1.0, max 175.0) · errors 42.0 % · p95 120 ms"
            ),
            "{text}"
        );
        assert!(
            text.contains("refused     budget 0 · no challenge 0"),
            "{text}"
        );
    }
}
