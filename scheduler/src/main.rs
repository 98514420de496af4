//! `queuegate-scheduler`: parse the command line, set up logging and TLS,
//! then hand over to [`queuegate_scheduler::cli`]. Exit codes: 0 ok,
//! 1 runtime failure (e.g. Redis unreachable), 2 usage or config error.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use queuegate_scheduler::cli::{self, Cli, Command};
use queuegate_signal::shutdown_signal;
use tracing_subscriber::EnvFilter;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The service logs its lifecycle; one-shot commands only their troubles
    // and their audit line.
    let default_level = if matches!(cli.command, Command::Run) {
        "info"
    } else {
        "warn,queuegate::audit=info"
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level)),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    // rustls is built without a default provider; `rediss://` needs one.
    // An Err only means one is installed already.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("queuegate-scheduler: {e:#}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli::execute(cli, shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("queuegate-scheduler: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}
