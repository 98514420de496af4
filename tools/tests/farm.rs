//! `queuegate-load --farm` end to end, tiny: 12 humans and a farm of 2
//! addresses × 12 identities take places before an opening on the whole
//! local room; the run stops once 12 are admitted, and the report's counts
//! must add up; and the same with issue #38's shapes (a farm of 20 IPv6
//! /64s of one /48, 6 people behind one NAT address). Needs the built
//! worker and `cargo build --bins` (scripts/test does both); about 20 s
//! each, run side by side.

use queuegate_tools::load::farm::{self, FarmOptions};
use queuegate_tools::load::farm_report::{self, Kind};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_farm_run_adds_up() {
    let opts = FarmOptions::smoke();
    let report = farm::run(&opts).await.expect("the farm run");
    let text = report.to_string();
    let (h, b) = (report.side(Kind::Human), report.side(Kind::Bot));

    // Everyone was run, from the addresses the options name.
    assert_eq!(h.identities, opts.humans, "{text}");
    assert_eq!(
        b.identities,
        opts.farm_addresses * opts.identities_per_address,
        "{text}"
    );
    assert_eq!(
        (h.addresses, b.addresses),
        (opts.humans, opts.farm_addresses),
        "{text}"
    );

    // Room for all, a budget that allows every identity before the
    // opening: every human and every identity was placed, before it.
    assert_eq!(report.humans_refused().len(), 0, "{text}");
    assert_eq!(h.pre_queued, h.identities, "{text}");
    assert_eq!(b.pre_queued, b.identities, "{text}");
    assert_eq!(report.drawn, h.pre_queued + b.pre_queued, "{text}");
    // The burst is smaller than M: the budget refused some and the farm
    // waited and sent the same solutions again.
    assert!(
        b.too_many > 0 && report.refused_budget >= b.too_many,
        "{text}"
    );

    // The first N: exactly N, split between the sides, in admission order.
    let first = report.first_n();
    assert_eq!(first.len() as u64, opts.humans, "{text}");
    assert_eq!(h.first_n + b.first_n, opts.humans, "{text}");
    let order = report.admission_order();
    assert!(
        order
            .windows(2)
            .all(|w| (w[0].issued_ms, w[0].ticket.unwrap_or(0))
                <= (w[1].issued_ms, w[1].ticket.unwrap_or(0))),
        "{text}"
    );
    let share = report.bot_first_n_share();
    assert!((share - b.first_n as f64 / opts.humans as f64).abs() < 1e-12);
    assert!(
        (report.bot_address_share()
            - opts.farm_addresses as f64 / (opts.humans + opts.farm_addresses) as f64)
            .abs()
            < 1e-12
    );
    assert!(
        (report.bot_place_share() - b.pre_queued as f64 / (h.pre_queued + b.pre_queued) as f64)
            .abs()
            < 1e-12
    );

    // The farm's spend: one solve per place at least, real CPU time, and
    // every request counted (a challenge and an enter per place, polls).
    assert!(b.spend.solves >= b.placed && b.spend.hashes >= b.spend.solves);
    assert!(b.spend.cpu_ns > 0, "{text}");
    assert!(b.requests.challenge >= b.placed, "{text}");
    assert!(b.requests.enter >= b.placed + b.too_many, "{text}");
    assert!(h.spend.simulated_ms > 0 && h.spend.cpu_ns > 0, "{text}");
    assert!(text.contains("farm share of addresses"), "{text}");

    let dir = tempfile::tempdir().expect("temp dir");
    let chart = farm_report::write_chart(&report, dir.path()).expect("chart");
    let svg = std::fs::read_to_string(chart).expect("chart written");
    assert!(svg.starts_with("<svg") && svg.contains("</svg>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_wide_run_adds_up() {
    let opts = FarmOptions::smoke_wide();
    let report = farm::run(&opts).await.expect("the farm run");
    let text = report.to_string();
    let (h, n, b) = (
        report.side(Kind::Human),
        report.side(Kind::Nat),
        report.side(Kind::Bot),
    );

    // Twenty /64s of one /48 (counted as 16), one NAT address for six.
    assert_eq!(
        (b.identities, b.addresses, b.counted_addresses),
        (20, 20, 16),
        "{text}"
    );
    assert!(
        report
            .parties
            .iter()
            .filter(|p| p.kind == Kind::Bot)
            .all(|p| p.address.starts_with("2001:db8:ff00:")),
        "{text}"
    );
    assert_eq!((n.identities, n.addresses), (opts.nat_humans, 1), "{text}");
    let all = (h.addresses + 1 + 16) as f64;
    assert!(
        (report.bot_address_share() - 16.0 / all).abs() < 1e-12,
        "{text}"
    );
    assert!(
        (report.bot_address_share_naive() - 20.0 / (h.addresses + 1 + 20) as f64).abs() < 1e-12,
        "{text}"
    );

    // Everyone placed, and the run went on until the NAT crowd was all
    // admitted: each of them has an admission rank.
    assert_eq!(report.humans_refused().len(), 0, "{text}");
    assert_eq!(n.placed, opts.nat_humans, "{text}");
    assert_eq!(n.admitted, opts.nat_humans, "{text}");
    assert_eq!(report.nat_ranks().len() as u64, opts.nat_humans, "{text}");
    let rho = report.nat_rank_correlation().expect("six ranks");
    assert!((-1.0..=1.0).contains(&rho), "{text}");
    assert_eq!(report.first_n().len() as u64, opts.humans, "{text}");
    assert_eq!(h.first_n + n.first_n + b.first_n, opts.humans, "{text}");
    assert!(text.contains("counted (as the product counts)"), "{text}");
    assert!(
        text.contains("Spearman ρ(arrival order, admission order)"),
        "{text}"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let chart = farm_report::write_chart(&report, dir.path()).expect("chart");
    let svg = std::fs::read_to_string(chart).expect("chart written");
    assert!(svg.contains("NAT crowd: arrival vs admission"));
}
