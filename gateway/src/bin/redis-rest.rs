//! `redis-rest`: flags, logging, bind, then [`redis_rest::run`] until ctrl-c
//! or SIGTERM.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use clap::Parser;
use redis_rest::config::Cli;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    // One line, no backtrace: these are operator errors (bad flag, port taken).
    if let Err(e) = serve(cli).await {
        eprintln!("redis-rest: {e:#}");
        std::process::exit(1);
    }
}

async fn serve(cli: Cli) -> anyhow::Result<()> {
    // Logs go to stderr; stdout carries only the "listening" line that
    // scripts and tests wait for.
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();

    let (listen, config) = cli.into_config()?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let addr = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "redis-rest listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);

    redis_rest::run(listener, config, queuegate_signal::shutdown_signal()).await?;
    Ok(())
}
