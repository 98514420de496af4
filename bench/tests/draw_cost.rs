//! `draw_cost` on a tiny pre-queue, so the bench cannot rot: the fill, the
//! seal, every batch found in the slowlog, memory read before and after.
//! Under a second.

use queuegate_bench::draw_cost::{draw_run, line_run};

#[tokio::test(flavor = "current_thread")]
async fn a_tiny_draw_is_timed_and_weighed() {
    let run = draw_run(250, 100, 0, 0).await.expect("the draw run");
    assert_eq!((run.placed, run.dropped), (250, 0));
    assert!(run.deal_us.is_empty(), "no address: nothing to deal");
    assert_eq!(run.place_us.len(), 3, "batches of 100, 100, 50");
    assert!(run.enter_usec > 0.0 && run.worst_us() > 0);
    assert!(run.before.set_bytes > 0 && run.after.set_bytes > 0 && run.after.seen_keys > 0);
    assert!(
        run.rank_correlation.abs() < 0.5,
        "ρ = {}",
        run.rank_correlation
    );
    // 250 visitors from 10 addresses: 25 rounds, every seat dealt (one
    // HSCAN page, then batches of 100, 100, 50 new scores at most).
    let dealt = draw_run(250, 100, 0, 10).await.expect("the dealt run");
    assert_eq!((dealt.placed, dealt.rounds), (250, 25));
    assert!(
        (2..=4).contains(&dealt.deal_us.len()),
        "{:?}",
        dealt.deal_us
    );
    assert!(
        dealt.rank_correlation.abs() < 0.5,
        "ρ = {}",
        dealt.rank_correlation
    );
    let line = line_run(250).await.expect("the line run");
    assert!(line.enter_usec > 0.0 && line.memory.set_bytes > 0);
}
