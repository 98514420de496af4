//! The command line: `run` the service, or an operator command that reads
//! or switches one queue. Each error maps to an exit code: 2 for usage and
//! config mistakes, 1 for runtime failures such as Redis being unreachable.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use queuegate_shared::fields::{config as cf, stats as sf};
use queuegate_shared::ops::{Change, Schedule, SetNotice, SetState, StateSwitch, Status};
use queuegate_shared::{QueueKeys, QueueState};

use crate::config::{self, Config, ConfigError, QueueConfig};
use crate::connect::{self, ConnectError, Patience, RedisConn};
use crate::engine::{self, EngineError};
use crate::service::{self, RunError};

/// queuegate's admission scheduler and its operator commands.
#[derive(Debug, Parser)]
#[command(name = "queuegate-scheduler", version, about, long_about = None)]
pub struct Cli {
    /// The TOML config file.
    #[arg(long, short, global = true, env = config::env::CONFIG, default_value = config::DEFAULT_PATH)]
    pub config: PathBuf,
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
    /// Validate the config and print each queue's effective settings.
    Check,
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
    let config = Config::load(&cli.config)?;
    let switch = |queue: Option<String>, state| (queue, state, None);
    let (queue, target, expect) = match cli.command {
        Command::Run => {
            return Ok(service::run_reloading(config, Some(cli.config), shutdown).await?)
        }
        Command::Check => {
            print!("{}", check_report(&config));
            return Ok(());
        }
        Command::Status { queue, json } => return status(&config, queue.as_deref(), json).await,
        Command::Schedule {
            queue,
            opens_at,
            closes_at,
            clear,
        } => {
            let change = schedule_change(opens_at.as_deref(), closes_at.as_deref(), clear)?;
            return schedule(&config, queue.as_deref(), change).await;
        }
        Command::Notice { queue, set, .. } => {
            return notice(&config, queue.as_deref(), set.as_deref()).await
        }
        Command::Pause { queue } => switch(queue, QueueState::Paused),
        Command::Close { queue } => switch(queue, QueueState::Closed),
        Command::Open { queue } => switch(queue, QueueState::Open),
        Command::Drain { queue } => switch(queue, QueueState::Draining),
        // Only from paused, compared inside the script: a `close` that
        // lands meanwhile is never undone.
        Command::Resume { queue } => (queue, QueueState::Open, Some(QueueState::Paused)),
    };
    let q = pick(&config, queue.as_deref())?;
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    set_state(&mut conn, &keys, target, expect).await
}

async fn set_state(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    state: QueueState,
    expect: Option<QueueState>,
) -> Result<(), CliError> {
    let name = |s: Option<QueueState>| s.map_or("unconfigured", QueueState::as_str);
    match engine::run(
        conn,
        &SetState {
            keys,
            state,
            expect,
        },
    )
    .await?
    {
        StateSwitch::Switched(previous) => {
            println!(
                "queue {}: {} (was {})",
                keys.queue(),
                state.as_str(),
                name(previous)
            );
            Ok(())
        }
        StateSwitch::Refused(Some(current)) if current == state => {
            println!("queue {}: already {}", keys.queue(), state.as_str());
            Ok(())
        }
        StateSwitch::Refused(current) => Err(CliError::Refused(format!(
            "queue {} is {}, not {}; use `open` to reopen it",
            keys.queue(),
            name(current),
            name(expect),
        ))),
    }
}

/// The opening and closing a `schedule` command asks for, validated.
fn schedule_change(
    opens_at: Option<&str>,
    closes_at: Option<&str>,
    clear: bool,
) -> Result<(Change, Change), CliError> {
    if clear {
        return Ok((Change::Clear, Change::Clear));
    }
    let time = |t: Option<&str>, flag: &str| -> Result<Change, CliError> {
        t.map_or(Ok(Change::Keep), |t| {
            config::parse_time(t)
                .map(Change::Set)
                .map_err(|e| CliError::Usage(format!("--{flag}: {e}")))
        })
    };
    let change = (time(opens_at, "opens-at")?, time(closes_at, "closes-at")?);
    match change {
        (Change::Keep, Change::Keep) => Err(CliError::Usage(
            "give --opens-at, --closes-at or --clear".into(),
        )),
        (Change::Set(open), Change::Set(close)) if close <= open => Err(CliError::Usage(
            "--closes-at must be after --opens-at".into(),
        )),
        _ => Ok(change),
    }
}

async fn schedule(
    config: &Config,
    queue: Option<&str>,
    (opens_at, closes_at): (Change, Change),
) -> Result<(), CliError> {
    let q = pick(config, queue)?;
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let now = engine::run(
        &mut conn,
        &Schedule {
            keys: &keys,
            opens_at,
            closes_at,
        },
    )
    .await?;
    let show = |t: Option<u64>| t.map_or("none".to_string(), config::format_time);
    println!(
        "queue {}: opens at {} · closes at {}",
        q.id,
        show(now.opens_at),
        show(now.closes_at)
    );
    if let (Some(open), Some(close)) = (now.opens_at, now.closes_at) {
        if close <= open {
            eprintln!("warning: the queue closes before it opens; nobody can enter");
        }
    }
    Ok(())
}

/// Sets (`text`) or clears (None) a queue's notice; a notice that is not
/// one short line of text is refused before Redis is asked.
async fn notice(config: &Config, queue: Option<&str>, text: Option<&str>) -> Result<(), CliError> {
    let q = pick(config, queue)?;
    let text = text
        .map(queuegate_shared::notice::check)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--set: {e}")))?;
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let keys = QueueKeys::new(&config.prefix, &q.id);
    let before = engine::run(
        &mut conn,
        &SetNotice {
            keys: &keys,
            notice: text,
        },
    )
    .await?;
    let was = if before.is_empty() {
        "none".to_string()
    } else {
        format!("{before:?}")
    };
    match text {
        Some(t) => println!("queue {}: notice {t:?} (was {was})", q.id),
        None => println!("queue {}: notice cleared (was {was})", q.id),
    }
    Ok(())
}

/// The named queue, or the only one.
fn pick<'a>(config: &'a Config, queue: Option<&str>) -> Result<&'a QueueConfig, CliError> {
    let ids = || {
        config
            .queues
            .iter()
            .map(|q| q.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match queue {
        Some(id) => config.queue(id).ok_or_else(|| {
            CliError::Usage(format!(
                "queue {id:?} is not in {}; configured: {}",
                config.origin,
                ids()
            ))
        }),
        None if config.queues.len() == 1 => Ok(&config.queues[0]),
        None => Err(CliError::Usage(format!(
            "name a queue; configured: {}",
            ids()
        ))),
    }
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
    out
}

/// What `status` shows of one queue (the JSON of `status --json`).
#[derive(Debug, serde::Serialize)]
struct QueueStatus {
    queue: String,
    state: Option<String>,
    waiting: u64,
    active: u64,
    max_active: Option<u64>,
    admitted_per_second: Option<f64>,
    lease_holder: Option<String>,
    lease_ttl_ms: Option<u64>,
    opens_at: Option<String>,
    closes_at: Option<String>,
    pre_queued: u64,
    drawing: u64,
    origin: OriginStatus,
    stats: BTreeMap<String, i64>,
    notice: Option<String>,
}

/// Origin control as the lease holder last recorded it.
#[derive(Debug, Default, serde::Serialize)]
struct OriginStatus {
    control: Option<bool>,
    target_rate_per_second: Option<f64>,
    max_rate_per_second: Option<f64>,
    min_rate_per_second: Option<f64>,
    error_share: Option<f64>,
    p95_ms: Option<f64>,
}

impl OriginStatus {
    fn of(config: &BTreeMap<String, String>) -> OriginStatus {
        let num = |field: &str| config.get(field).and_then(|v| v.parse::<f64>().ok());
        OriginStatus {
            control: config.get(cf::ORIGIN_CONTROL).and_then(|v| v.parse().ok()),
            target_rate_per_second: num(cf::TARGET_RATE),
            max_rate_per_second: num(cf::ADMIT_RATE_PER_SECOND),
            min_rate_per_second: num(cf::MIN_ADMIT_RATE_PER_SECOND),
            error_share: num(cf::ORIGIN_ERROR_SHARE),
            p95_ms: num(cf::ORIGIN_P95_MS),
        }
    }

    fn line(&self) -> String {
        let max = self
            .max_rate_per_second
            .map_or("?".to_string(), |m| format!("{m:.1}"));
        if self.control == Some(false) {
            return format!("control off: fixed {max}/s");
        }
        let target = self
            .target_rate_per_second
            .map_or("not measured yet".to_string(), |t| format!("{t:.1}/s"));
        let min = self
            .min_rate_per_second
            .map_or("?".to_string(), |m| format!("{m:.1}"));
        let errors = self
            .error_share
            .map_or("no answers".to_string(), |e| format!("{:.1} %", e * 100.0));
        let p95 = self
            .p95_ms
            .map_or("-".to_string(), |p| format!("{p:.0} ms"));
        format!("target {target} (min {min}, max {max}) · errors {errors} · p95 {p95}")
    }
}

async fn read_status(conn: &mut RedisConn, keys: &QueueKeys) -> Result<QueueStatus, CliError> {
    let s = engine::run(conn, &Status { keys }).await?;
    Ok(QueueStatus {
        queue: keys.queue().to_string(),
        state: s.config.get(cf::STATE).cloned(),
        waiting: s.waiting,
        active: s.active,
        max_active: s.setting(cf::MAX_ACTIVE),
        admitted_per_second: s.measured_rate(),
        lease_ttl_ms: s.lease.as_ref().map(|(_, ttl)| *ttl),
        lease_holder: s.lease.as_ref().map(|(holder, _)| holder.clone()),
        opens_at: s.scheduled(cf::OPENS_AT).map(config::format_time),
        closes_at: s.scheduled(cf::CLOSES_AT).map(config::format_time),
        pre_queued: s.pre_queued,
        drawing: s.drawing(),
        origin: OriginStatus::of(&s.config),
        stats: s.counters(),
        notice: s.config.get(cf::NOTICE).cloned(),
    })
}

async fn status(config: &Config, queue: Option<&str>, json: bool) -> Result<(), CliError> {
    let queues: Vec<&QueueConfig> = match queue {
        Some(_) => vec![pick(config, queue)?],
        None => config.queues.iter().collect(),
    };
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let mut all = Vec::new();
    for q in queues {
        all.push(read_status(&mut conn, &QueueKeys::new(&config.prefix, &q.id)).await?);
    }
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
    ) + &s
        .notice
        .as_ref()
        .map_or(String::new(), |n| format!("  notice      {n:?}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

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
        assert!(
            Cli::try_parse_from(["qs", "schedule", "--clear", "--opens-at", "x"]).is_err(),
            "--clear takes nothing else"
        );
    }

    #[test]
    fn schedule_times_are_rfc3339_and_in_order() {
        let at = |t: &str| config::parse_time(t).unwrap();
        assert_eq!(
            schedule_change(Some("2026-12-03T14:00:00Z"), None, false).unwrap(),
            (Change::Set(at("2026-12-03T14:00:00Z")), Change::Keep)
        );
        assert_eq!(
            at("2026-12-03T15:00:00+01:00"),
            at("2026-12-03T14:00:00Z"),
            "offsets count"
        );
        assert_eq!(
            schedule_change(None, None, true).unwrap(),
            (Change::Clear, Change::Clear)
        );
        for (open, close) in [
            (None, None),
            (Some("tomorrow"), None),
            (Some("2026-12-03T14:00:00"), None),
            (Some("2026-12-03T14:00:00Z"), Some("2026-12-03T13:00:00Z")),
        ] {
            let err = schedule_change(open, close, false).unwrap_err();
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
        let err = pick(&one, Some("other")).unwrap_err();
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
