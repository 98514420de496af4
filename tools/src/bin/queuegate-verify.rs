//! `queuegate-verify`: checks a queue's pre-queue draw from its public
//! record (and a receipt, and the live line for an auditor with Redis
//! access); exits 1 saying what failed on any mismatch, 2 when a check
//! could not run (docs/drop-day.md, *A draw anyone can verify*).

use clap::Parser;
use queuegate_tools::verify::{self, Failure};

/// Verify a queue's draw.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The waiting room's address (it serves `/queue/draw`).
    #[arg(long)]
    url: String,
    /// The queue.
    #[arg(long)]
    queue: String,
    /// The draw's number (default: the latest revealed).
    #[arg(long)]
    draw: Option<u64>,
    /// A receipt to check (its JSON, or `@FILE`).
    #[arg(long)]
    receipt: Option<String>,
    /// Redis, for an auditor with read access: check the live line too.
    #[arg(long)]
    redis: Option<String>,
    /// A drand HTTP endpoint (e.g. https://api.drand.sh): check the
    /// record's beacon value against the round it names there.
    #[arg(long, value_name = "URL")]
    beacon_url: Option<String>,
    /// The key prefix in Redis.
    #[arg(long, default_value = "qg")]
    prefix: String,
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    if let Err(f) = run(&args).await {
        eprintln!("queuegate-verify: FAILED: {f}");
        std::process::exit(f.exit_code());
    }
}

async fn run(args: &Args) -> Result<(), Failure> {
    let checked = verify::fetch_and_check(&args.url, &args.queue, args.draw).await?;
    let r = &checked.record;
    println!(
        "record: draw {} of {}: the seed opens commitment {}, {} leaves give root {}, {} places verified in {} rounds",
        r.draw,
        r.queue,
        r.commitment,
        checked.leaves.len(),
        r.root,
        checked.places.len(),
        r.rounds.len()
    );
    match &r.beacon {
        Some(b) => println!(
            "beacon: the draw key mixes in {} round {} (value {})",
            b.source, b.round, b.value
        ),
        None => println!("beacon: none named; the draw key is the seed's and the root's"),
    }
    if let Some(url) = &args.beacon_url {
        let round = verify::check_beacon(url, r).await?;
        println!("beacon: {url} publishes the record's value for round {round}");
    }
    if let Some(text) = &args.receipt {
        let text = match text.strip_prefix('@') {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| Failure::Unable(format!("{path}: {e}")))?,
            None => text.clone(),
        };
        let receipt = verify::parse_receipt(&text)?;
        r.check_receipt(&receipt)?;
        println!(
            "receipt: leaf {} is in the record at index {} and the draw gives it place {}",
            receipt.index, receipt.index, receipt.place
        );
    }
    if let Some(url) = &args.redis {
        let line = verify::check_line(url, &args.prefix, &checked).await?;
        println!(
            "line: {} drawn visitors in line, each on the ticket the draw gives it ({} left or admitted)",
            line.in_line,
            r.registrants - line.in_line
        );
        if line.dealt > 0 {
            println!(
                "line: {} of them on a seat dealt among their address's identities after the seal \
                 (the record holds no address groups, so the deal's order is not checked)",
                line.dealt
            );
        }
    }
    Ok(())
}
