//! The chaos run's short form (issue #37), so what it proves is proved on
//! every change: a drop on the real stack — Redis with its append-only
//! file, the gateway, three schedulers, the worker under workerd — through
//! every kind of fault twice (kill -9 and SIGSTOP of the lease holder,
//! Redis killed and restarted or paused, the gateway restarted, run-time
//! settings, the opening postponed, the holder reloading another file),
//! with no invariant broken. Needs the built worker and `cargo build
//! --bins` (scripts/test does both); about a minute. The long form's
//! figures are in BENCHMARKS.md.

use queuegate_tools::load::chaos::{self, ChaosOptions, FaultKind};
use queuegate_tools::load::visitor::Outcome;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_keeps_every_place_through_every_kind_of_fault() {
    let opts = ChaosOptions::smoke();
    let report = chaos::run(&opts).await.expect("the chaos run");
    let text = report.to_string();
    eprintln!("{text}");

    assert!(report.violations.is_empty(), "{text}");
    // Every fault was injected (a holder was found each time), every kind
    // at least twice but the one postponement.
    assert_eq!(report.faults(), opts.faults as usize, "{text}");
    for kind in chaos::chart_rows() {
        let n = report.injected.iter().filter(|f| f.kind == kind).count();
        let least = if kind == FaultKind::Postpone { 1 } else { 2 };
        assert!(n >= least, "{kind:?} injected {n} times:\n{text}");
    }
    // The checks saw the run: the watcher read the queue throughout (bar
    // the seconds Redis was down or paused), and everyone who came was
    // admitted and ordered, after the postponed opening.
    assert!(
        report.samples.len() as u64 > 10 * opts.deadline().as_secs() / 2,
        "{text}"
    );
    assert_eq!(report.records.len() as u64, opts.pre_queue + opts.later);
    assert_eq!(
        report.count(Outcome::Ordered),
        report.records.len(),
        "{text}"
    );
    let postponed = report.start_ms + (opts.opens_in + opts.postpone).as_millis() as u64;
    assert!(report.opens_at.abs_diff(postponed) < 1_000, "{text}");

    let dir = tempfile::tempdir().expect("temp dir");
    let chart = chaos::write_chart(&report, opts.max_active, dir.path()).expect("chart");
    let svg = std::fs::read_to_string(&chart).expect("chart written");
    assert!(svg.starts_with("<svg") && svg.contains("Faults injected"));
}
