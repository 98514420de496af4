//! The command line: `run` the service, or an operator command, parsed
//! into an [`Action`] and its [`Done`] printed ([`output`]). Each error
//! maps to an exit code: 2 for usage and config mistakes, 1 for runtime
//! failures such as Redis being unreachable.

mod local;
mod output;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::actions::{
    self, Action, ActionError, Bypass, BypassCall, Notice, Reset, Revocation, RevocationCall,
    Schedule, Settings, SettingsCall, Status, Stock, Switch, SwitchState, Visitor,
};
use crate::audit;
use crate::config::{self, Config, ConfigError};
use crate::connect::{self, ConnectError, Patience};
use crate::engine::EngineError;
use crate::service::{self, RunError};
use queuegate_shared::ops::StockChange;

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
        /// Mix a public randomness beacon into the opening's draw: `drand`
        /// (the config's `[beacon]`). Its first round after the opening is
        /// named now, published with the commitment, and read at the
        /// reveal; the draw waits for it.
        #[arg(long, value_name = "SOURCE")]
        beacon: Option<String>,
    },
    /// Set or clear a short notice to the line ("sizes S and M are sold
    /// out"): one line of plain text, at most 280 characters, shown on the
    /// waiting-room page and in every state reply within seconds (the
    /// edge reads it with its snapshot), without a redeploy. --lang gives
    /// it in other languages: a visitor whose page is in one of them sees
    /// that text, everybody else the default (--set).
    Notice {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// The notice (its default text).
        #[arg(long, value_name = "TEXT", required_unless_present = "clear")]
        set: Option<String>,
        /// The notice in one language of the page (en, de, es, fr, ja, ko,
        /// pt, zh, zh-Hant), as LANG=TEXT; repeat for more.
        #[arg(long = "lang", value_name = "LANG=TEXT", requires = "set")]
        langs: Vec<String>,
        /// Remove the notice (and its texts in every language).
        #[arg(long, conflicts_with = "set")]
        clear: bool,
    },
    /// Empty a closed queue for a rehearsal: its line, pre-queue,
    /// statistics, visitors' statuses and tokens (settings, state,
    /// schedule, notice and bypass links stay; a stock is cleared). Refused unless the queue is closed, and
    /// while admitted visitors hold slots unless --force.
    Reset {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Reset even while admitted visitors hold slots (their tokens stop
        /// working).
        #[arg(long)]
        force: bool,
    },
    /// The stock on sale (docs/drop-day.md, *Stock*): every order the shop
    /// accepts takes one unit (or as many as its reply's Queuegate-Units
    /// says); admission never lets out more turns than the units left
    /// allow, and with none left the line is told `sold_out`, new visitors
    /// get no place and orders never reach the shop. Raising the stock
    /// again reopens the line in the same order. Without a flag: show it.
    Stock {
        /// The queue (may be left out when only one is configured).
        queue: Option<String>,
        /// Units left for sale from now (orders in flight keep theirs).
        #[arg(long, value_name = "N", group = "change")]
        set: Option<u64>,
        /// Units added (negative: taken away, e.g. damaged goods).
        #[arg(
            long,
            value_name = "N",
            allow_negative_numbers = true,
            group = "change"
        )]
        add: Option<i64>,
        /// Units of refunded orders: back on sale, off the sold count.
        #[arg(long, value_name = "N", group = "change")]
        refund: Option<u64>,
        /// The overbooking margin for no-shows in percent (0 to 100), or
        /// `auto`: measured from the drop's own conversion (the default).
        #[arg(long, value_name = "PERCENT|auto", group = "change")]
        overbook: Option<String>,
        /// Keep no stock any more: admission and orders are no longer
        /// limited by it.
        #[arg(long, group = "change")]
        clear: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
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
        return local::admin_token(name);
    }
    let (config, file) = local::load_config(cli.config)?;
    let (action, json) = match cli.command {
        Command::Run => return Ok(service::run_reloading(config, file, shutdown).await?),
        Command::Check => {
            print!("{}", local::check_report(&config));
            return Ok(());
        }
        Command::Healthcheck => return local::healthcheck(config.listen),
        command => parse(command, &config)?,
    };
    let mut conn = connect::open(&config.redis, Patience::Once).await?;
    let done = if audited(&action) {
        let who = audit::cli_user();
        action.perform(&config, &mut conn, &who, None).await
    } else {
        action.apply(&config, &mut conn).await
    };
    output::print(done?, action.queue(), json);
    Ok(())
}

/// An operator command as the [`Action`] it asks for, and whether to print
/// JSON. Its own flags are checked first, then the queue is named (the
/// only one when left out) before Redis is asked.
fn parse(command: Command, config: &Config) -> Result<(Action, bool), CliError> {
    let one = |queue: Option<String>| -> Result<Option<String>, CliError> {
        Ok(Some(
            actions::pick(config, queue.as_deref())?.id.to_string(),
        ))
    };
    let switch = |queue, switch| -> Result<(Action, bool), CliError> {
        let queue = one(queue)?;
        Ok((Action::Switch(SwitchState { queue, switch }), false))
    };
    Ok(match command {
        // Without a queue: every configured queue.
        Command::Status { queue, json } => (Action::Status(Status { queue }), json),
        Command::Pause { queue } => return switch(queue, Switch::Pause),
        Command::Resume { queue } => return switch(queue, Switch::Resume),
        Command::Close { queue } => return switch(queue, Switch::Close),
        Command::Open { queue } => return switch(queue, Switch::Open),
        Command::Drain { queue } => return switch(queue, Switch::Drain),
        Command::Schedule {
            queue,
            opens_at,
            closes_at,
            clear,
            beacon,
        } => {
            let mut schedule = Schedule {
                queue: None,
                opens_at,
                closes_at,
                clear,
                beacon,
                names: actions::FLAGS,
            };
            schedule.change()?;
            schedule.queue = one(queue)?;
            (Action::Schedule(schedule), false)
        }
        Command::Notice {
            queue, set, langs, ..
        } => {
            let texts = langs
                .iter()
                .map(|l| {
                    l.split_once('=')
                        .map(|(lang, text)| (lang.trim().to_string(), text.to_string()))
                        .ok_or_else(|| {
                            ActionError::BadInput(format!(
                                "--lang {l:?}: give a language and its text as LANG=TEXT (de=Ausverkauft)"
                            ))
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut notice = Notice {
                queue: None,
                text: set,
                texts,
                input: "--set",
                texts_input: "--lang",
            };
            notice.text()?;
            notice.queue = one(queue)?;
            (Action::Notice(notice), false)
        }
        Command::Reset { queue, force } => {
            let queue = one(queue)?;
            (Action::Reset(Reset { queue, force }), false)
        }
        Command::Settings {
            queue,
            set,
            unset,
            clear,
            json,
        } => {
            let changes = settings_changes(&set, &unset)?;
            let call = if clear {
                SettingsCall::Clear
            } else if changes.is_empty() {
                SettingsCall::Show
            } else {
                SettingsCall::Change(changes)
            };
            let queue = one(queue)?;
            (Action::Settings(Settings { queue, call }), json)
        }
        Command::Visitor {
            queue,
            id: user,
            revoke,
            minutes,
            lift,
            json,
        } => {
            let queue = one(queue)?;
            let revocation = |call| {
                Action::Revocation(Revocation {
                    queue: queue.clone(),
                    user: user.clone(),
                    call,
                })
            };
            if revoke {
                (revocation(RevocationCall::Revoke { minutes }), json)
            } else if lift {
                // A lift answers in text only.
                (revocation(RevocationCall::Lift), false)
            } else {
                (Action::Visitor(Visitor { queue, user }), json)
            }
        }
        Command::Stock {
            queue,
            set,
            add,
            refund,
            overbook,
            clear,
            json,
        } => {
            let change = match (set, add, refund, overbook, clear) {
                (Some(n), ..) => StockChange::Set(n),
                (_, Some(n), ..) => StockChange::Add(n),
                (_, _, Some(n), ..) => StockChange::Refund(n),
                (_, _, _, Some(p), _) if p.trim() == "auto" => StockChange::Overbook(None),
                (_, _, _, Some(p), _) => {
                    StockChange::Overbook(Some(p.trim().parse().map_err(|_| {
                        ActionError::BadInput(format!(
                            "--overbook {p:?}: give a percentage from 0 to 100, or auto"
                        ))
                    })?))
                }
                (.., true) => StockChange::Clear,
                _ => StockChange::Show,
            };
            let change = change.check().map_err(ActionError::BadInput)?;
            let queue = one(queue)?;
            (Action::Stock(Stock { queue, change }), json)
        }
        Command::Bypass { action } => {
            let (queue, call, json) = match action {
                BypassCommand::Create {
                    queue,
                    name,
                    minutes,
                } => (
                    queue,
                    BypassCall::Create {
                        name,
                        ttl_minutes: minutes,
                    },
                    false,
                ),
                BypassCommand::List { queue, json } => (queue, BypassCall::List, json),
                BypassCommand::Revoke { queue, id } => (queue, BypassCall::Revoke { id }, false),
            };
            let queue = one(queue)?;
            (Action::Bypass(Bypass { queue, call }), json)
        }
        Command::Run | Command::Check | Command::Healthcheck | Command::AdminToken { .. } => {
            return Err(CliError::Usage("not an operator action".into()))
        }
    })
}

/// Whether the command line records an action in the audit trail: every
/// change, and a visitor lookup (it reads a person's records); not the
/// plain reads of a queue's own state (`status`, `settings`, `bypass
/// list`), which an operator on the host repeats at will.
fn audited(action: &Action) -> bool {
    !matches!(
        action,
        Action::Status(_)
            | Action::Settings(Settings {
                call: SettingsCall::Show,
                ..
            })
            | Action::Bypass(Bypass {
                call: BypassCall::List,
                ..
            })
    )
}

/// `settings --set NAME=VALUE … --unset NAME …` as the changes they ask
/// for: values read as in the config file, an unset as `null`.
fn settings_changes(set: &[String], unset: &[String]) -> Result<crate::runtime::Values, CliError> {
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
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actions::pick;
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
}
