//! Drop day (issue #13) against real processes: the pre-queue before a
//! scheduled opening, the draw's fairness, the draw surviving kill -9 of
//! its scheduler, leavers dropped at the draw, and the scheduler's
//! `schedule` command. Idle passthrough is in passthrough.rs.

use std::time::{Duration, Instant};

use queuegate_shared::draw::DrawSlot;
use queuegate_shared::fields::{config as cf, stats as sf, ADDRESS_FULL_HOLD_MS};
use queuegate_shared::guard::{ClientAddress, EntryGuard, GuardCheck};
use queuegate_shared::ops::{
    Change, Enter, EnterReply, Observed, Refusal, Scheduled, SetState, StateSwitch,
};
use queuegate_shared::state::{StateReply, UserState};
use queuegate_shared::{Prefix, QueueId, QueueKeys, QueueState, Settings, UserId};
use queuegate_system_tests::drop_day::{
    config_field, enter_pipelined, entered_position, eventually, exists, in_ms, open_now, position,
    schedule, score, scores, spearman, DrawRun,
};
use queuegate_system_tests::{fast_settings, grants, user, TestQueue};
use queuegate_testkit::scheduler::{self, Scheduler, SchedulerBuilder};
use queuegate_testkit::{now_ms, since_epoch, wait_until, RedisServer};
use tokio::runtime::Runtime;

fn is_pre_queued(o: &Observed) -> bool {
    matches!(o, Observed::PreQueue(_))
}

fn is_pre_queued_reply(r: &EnterReply) -> bool {
    matches!(r, EnterReply::Entered(Observed::PreQueue(_)))
}

/// A draw seed: `QG_SEED=<n>` replays one, otherwise the clock picks it
/// (printed, so a failure can be replayed).
fn seed() -> [u8; 32] {
    let n: u64 = std::env::var("QG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| since_epoch().as_nanos() as u64);
    eprintln!("draw seed QG_SEED={n}");
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(
            &n.wrapping_mul(0x9e37_79b9_7f4a_7c15 ^ i as u64)
                .to_le_bytes(),
        );
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_the_opening_visitors_pre_queue_keep_their_draw_and_count_toward_the_limits() {
    let redis = RedisServer::start();
    let settings = Settings {
        max_waiting: 6,
        challenge_crowd: 6,
        abandon_after_ms: 60_000,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "pre", settings).await;
    // Two in line before the opening is scheduled: they keep their places.
    for i in 0..2 {
        assert_eq!(
            entered_position(&q.enter(&user(i)).await),
            Some(i as u64 + 1)
        );
    }
    let opens = in_ms(60_000);
    let set = schedule(&q, Change::Set(opens), Change::Keep).await;
    assert_eq!(
        set,
        Scheduled {
            opens_at: Some(opens),
            closes_at: None,
            version: 1,
        }
    );

    // A new visitor joins the pre-queue: no position, the opening instead.
    let facts = match q.enter(&user(10)).await {
        EnterReply::Entered(Observed::PreQueue(f)) => f,
        other => panic!("a new place before the opening: {other:?}"),
    };
    assert_eq!(facts.opens_at, Some(opens));
    assert!(facts.now < opens && facts.now.abs_diff(now_ms()) < 5_000);
    let json = serde_json::to_value(StateReply {
        state: Observed::PreQueue(facts).into_user_state(&q.settings, 0.5),
        queue: "pre".into(),
        notice: None,
        chance_percent: None,
    })
    .unwrap();
    assert_eq!(json["state"], "pre_queue", "{json}");
    assert_eq!(json["opensAt"], opens, "{json}");
    assert!(json["retryAfterMs"].as_u64().is_some(), "{json}");
    assert!(json.get("position").is_none(), "{json}");
    assert!(is_pre_queued(&q.position(&user(10)).await));
    assert_eq!(position(&q.position(&user(0)).await), Some(1));

    // A refresh keeps the pre-ticket (the draw's input) and takes no new one.
    let pre_ticket = score(&q, &q.keys.pre(), &user(10)).await.expect("in pre");
    for _ in 0..3 {
        assert!(matches!(
            q.enter(&user(10)).await,
            EnterReply::Entered(Observed::PreQueue(_))
        ));
    }
    assert_eq!(score(&q, &q.keys.pre(), &user(10)).await, Some(pre_ticket));
    assert_eq!(q.stat(sf::ENTERED).await, 3);

    // The guard applies to a new pre-queued place, and writes only its counter.
    let refused = q
        .run(&Enter {
            keys: &q.keys,
            user: &user(20),
            guard: EntryGuard {
                missing: Some(GuardCheck::Challenge),
                ..EntryGuard::default()
            },
            token: None,
        })
        .await
        .unwrap();
    assert_eq!(
        refused,
        EnterReply::Refused(Refusal::Missing(GuardCheck::Challenge))
    );
    assert_eq!(score(&q, &q.keys.pre(), &user(20)).await, None);

    // max_waiting counts the line and the pre-queue together: 2 + 4 = 6.
    for i in 11..14 {
        let r = q.enter(&user(i)).await;
        assert!(
            matches!(r, EnterReply::Entered(Observed::PreQueue(_))),
            "user {i}: {r:?}"
        );
    }
    assert_eq!(
        q.enter(&user(14)).await,
        EnterReply::Full {
            waiting: 6,
            max_waiting: 6
        }
    );
    assert!(
        is_pre_queued(&q.position(&user(13)).await),
        "a refresh when full"
    );

    // The opening: the first entry seals the pre-queue (the draw's places
    // count toward the limit too), before any scheduler tick.
    open_now(&q).await;
    assert!(matches!(
        q.enter(&user(14)).await,
        EnterReply::Full { waiting: 6, .. }
    ));
    assert!(!exists(&q, &q.keys.pre()).await, "sealed by the entry");
    assert_eq!(q.zcard(&q.keys.draw()).await, 4);
    assert_eq!(config_field(&q, cf::DRAW_LEFT).await.as_deref(), Some("4"));
    assert!(
        is_pre_queued(&q.position(&user(11)).await),
        "no place before it is drawn"
    );
    assert_eq!(
        position(&q.position(&user(1)).await),
        Some(2),
        "the line keeps its places"
    );
    // Nobody is admitted while the draw runs.
    q.set_lock("test").await;
    match q.admit("test", 5, &grants(5, 0)).await {
        queuegate_shared::ops::AdmitReply::Ran(c) => {
            assert!(c.drawing && c.admitted == 0, "{c:?}")
        }
        other => panic!("admit: {other:?}"),
    }

    let mut run = DrawRun::open(&q, "test", seed())
        .await
        .expect("a draw runs");
    run.finish(&q, 3).await;
    assert_eq!((run.placed(), run.dropped()), (4, 0));
    for i in 0..2 {
        assert_eq!(position(&q.position(&user(i)).await), Some(i as u64 + 1));
    }
    let mut drawn: Vec<u64> = Vec::new();
    for i in 10..14 {
        drawn.push(position(&q.position(&user(i)).await).expect("placed"));
    }
    drawn.sort_unstable();
    assert_eq!(drawn, vec![3, 4, 5, 6], "right behind the line");

    // One admitted; a newcomer now lines up behind everyone drawn.
    q.admit("test", 1, &grants(1, 0)).await;
    assert_eq!(entered_position(&q.enter(&user(14)).await), Some(6));

    // The closing refuses new places; everyone in line keeps theirs.
    schedule(&q, Change::Keep, Change::Set(now_ms() - 1)).await;
    assert_eq!(
        q.enter(&user(15)).await,
        EnterReply::Closed(Some(QueueState::Closed))
    );
    assert_eq!(entered_position(&q.enter(&user(1)).await), Some(1));
    assert_eq!(entered_position(&q.enter(&user(14)).await), Some(6));
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_draw_places_2000_pre_queued_visitors_at_random_right_behind_the_line() {
    const N: usize = 2_000;
    let redis = RedisServer::start();
    let q = TestQueue::open(&redis.url(), "fair", Settings::default()).await;
    schedule(&q, Change::Set(in_ms(3_600_000)), Change::Keep).await;
    let users: Vec<UserId> = (0..N).map(user).collect();
    enter_pipelined(&q, &users).await;
    // Arrival order is known: pre-tickets follow it.
    let pre: Vec<u64> = scores(&q, &q.keys.pre(), &users)
        .await
        .into_iter()
        .map(|s| s.expect("pre-queued"))
        .collect();
    assert!(
        pre.windows(2).all(|w| w[0] < w[1]),
        "pre-tickets by arrival"
    );

    open_now(&q).await;
    let mut run = DrawRun::open(&q, "test", seed()).await.expect("sealed");
    assert_eq!(run.drawing().size(), N as u64);
    let started = Instant::now();
    let left = run.step(&q, 250).await;
    assert_eq!(left, N as u64 - 250);

    // Mid-draw: a newcomer's ticket is behind the reserved range, and its
    // position counts the visitors not placed yet (rank + draw_left).
    let late = user(N);
    assert_eq!(entered_position(&q.enter(&late).await), Some(N as u64 + 1));
    let late_ticket = score(&q, &q.keys.waiting(), &late).await.unwrap();
    assert!(late_ticket > run.drawing().end);
    // The first by rank are placed already, yet shown no place until the
    // draw is over.
    assert!(score(&q, &q.keys.waiting(), &users[0]).await.is_some());
    assert!(is_pre_queued(&q.position(&users[0]).await));
    q.set_lock("test").await;
    let before = q.snapshot().await.get(&q.keys.waiting()).cloned();
    match q.admit("test", 10, &grants(10, 0)).await {
        queuegate_shared::ops::AdmitReply::Ran(c) => assert!(c.drawing && c.admitted == 0),
        other => panic!("admit: {other:?}"),
    }
    assert_eq!(q.snapshot().await.get(&q.keys.waiting()).cloned(), before);

    run.finish(&q, 250).await;
    let took = started.elapsed();
    assert_eq!((run.placed(), run.dropped()), (N as u64, 0));
    let mut positions = Vec::with_capacity(N);
    for u in &users {
        positions.push(position(&q.position(u).await).expect("placed in line"));
    }
    let mut sorted = positions.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (1..=N as u64).collect::<Vec<_>>(), "exactly 1..=N");
    assert_eq!(position(&q.position(&late).await), Some(N as u64 + 1));

    let arrival: Vec<u64> = (0..N as u64).collect();
    let rho = spearman(&arrival, &positions);
    // Under a uniform draw ρ has sd 1/√(N−1) ≈ 0.022: 0.1 is 4.5 sd.
    eprintln!("{N} drawn in {took:?} (batches of 250): Spearman ρ(arrival, position) = {rho:.4}");
    assert!(rho.abs() < 0.1, "ρ = {rho}");
    // The first tenth to arrive is spread over the line, not ahead of it.
    let first: f64 = positions[..N / 10].iter().sum::<u64>() as f64 / (N / 10) as f64;
    assert!((first - N as f64 / 2.0).abs() < N as f64 / 10.0, "{first}");

    assert!(!exists(&q, &q.keys.draw()).await);
    assert_eq!(config_field(&q, cf::DRAW_LEFT).await.as_deref(), Some("0"));
    assert_eq!(q.stat(sf::DRAWN).await, N as i64);
    q.assert_conserved().await;
}

/// Enters `u` from `address` (no solution needed: the guard's checks are
/// the edge's).
async fn enter_from(q: &TestQueue, u: &UserId, address: &str) -> EnterReply {
    let address = ClientAddress::parse(address).expect("an address");
    q.run(&Enter {
        keys: &q.keys,
        user: u,
        guard: EntryGuard {
            address: Some(&address),
            solution: None,
            missing: None,
        },
        token: None,
    })
    .await
    .expect("enter")
}

/// Volume does not buy the drawn line (issue #22): the draw is fair per
/// address group. A farm behind one IPv4 address enters 200 identities
/// before anyone else; 40 people on their own addresses come after it; a
/// /48 poses as 64 addresses (one /64 each, in 64 /56s) and a /56 as 8.
/// Every group's first place is drawn before any group's second, and so
/// on: the 40 people, the farm's first identity, the /48's first 16 (a /48
/// counts as at most 16 addresses) and the /56's first 4 share the first
/// 61 places, in a random order. Under a draw per identity (main before
/// this change) the people would be spread over all 312 places. Which of
/// the farm's identities holds which of its 200 seats is dealt after the
/// seal (issue #38), so its fastest identity is not its first drawn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_draw_is_fair_per_address_group_not_per_identity() {
    let redis = RedisServer::start();
    let settings = Settings {
        entry_budget_per_minute: 0,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "groups", settings).await;
    schedule(&q, Change::Set(in_ms(3_600_000)), Change::Keep).await;
    // (user, the draw round its group's count puts it in)
    let mut entered: Vec<(UserId, u64)> = Vec::new();
    let mut n = 0;
    let mut next = |round: u64, entered: &mut Vec<(UserId, u64)>| {
        n += 1;
        entered.push((user(n), round));
        user(n)
    };
    for k in 1..=200 {
        let u = next(k, &mut entered);
        assert!(is_pre_queued_reply(&enter_from(&q, &u, "198.18.0.1").await));
    }
    for h in 0..40 {
        let u = next(1, &mut entered);
        let ip = format!("203.0.113.{}", h + 1);
        assert!(is_pre_queued_reply(&enter_from(&q, &u, &ip).await));
    }
    for j in 0..64u64 {
        let u = next(j / 16 + 1, &mut entered);
        let ip = format!("2001:db8:1:{:x}00::1", j);
        assert!(is_pre_queued_reply(&enter_from(&q, &u, &ip).await));
    }
    for j in 0..8u64 {
        let u = next(j / 4 + 1, &mut entered);
        let ip = format!("2001:db8:2:10{j}::7");
        assert!(is_pre_queued_reply(&enter_from(&q, &u, &ip).await));
    }
    let total = entered.len() as u64;
    assert_eq!(total, 312);
    // The enters kept each round's size for the seal.
    assert_eq!(hget(&q, &q.keys.groups(), "#1").await, Some(61));
    assert_eq!(hget(&q, &q.keys.groups(), "#200").await, Some(1));

    open_now(&q).await;
    let mut run = DrawRun::open(&q, "test", seed()).await.expect("sealed");
    // Round sizes: 1 + 40 + 16 + 4, then 1 + 16 + 4, 1 + 16, 1 + 16, then
    // the farm's 196 later identities one round each.
    let mut expected = vec![61, 21, 17, 17];
    expected.extend(std::iter::repeat_n(1, 196));
    assert_eq!(run.drawing().rounds, expected);
    assert_eq!(
        config_field(&q, cf::DRAW_ROUNDS)
            .await
            .map(|r| r.split(',').count()),
        Some(200)
    );
    assert!(
        !exists(&q, &q.keys.groups()).await,
        "the counts go at sealing"
    );
    run.finish(&q, 50).await;
    assert_eq!((run.placed(), run.dropped()), (total, 0));

    // Each round holds exactly its own block of places.
    let mut starts = vec![0u64];
    for size in &expected {
        starts.push(starts.last().unwrap() + size);
    }
    // Everyone but the farm is in its round's block. The farm's seats
    // (one in each of rounds 1 to 200) were dealt among its identities
    // at random: one farm identity in each block, not in arrival order.
    let block = |p: u64| starts.iter().position(|&s| s >= p).unwrap() as u64;
    let mut seen = Vec::new();
    let mut farm_rounds = Vec::new();
    for (i, (u, round)) in entered.iter().enumerate() {
        let p = position(&q.position(u).await).expect("placed in line");
        if i < 200 {
            farm_rounds.push(block(p));
        } else {
            assert_eq!(block(p), *round, "{u} of round {round} at {p}");
        }
        seen.push(p);
    }
    seen.sort_unstable();
    assert_eq!(seen, (1..=total).collect::<Vec<_>>());
    let mut dealt = farm_rounds.clone();
    dealt.sort_unstable();
    assert_eq!(dealt, (1..=200).collect::<Vec<u64>>(), "one a round");
    let arrival: Vec<u64> = (1..=200).collect();
    let rho = spearman(&arrival, &farm_rounds);
    assert!(rho.abs() < 0.35, "the farm drawn by arrival: ρ {rho}");
    // Within round 1 the order is the draw's, not arrival: the farm's first
    // identity arrived before all 60 others, yet it is not simply first, and
    // the people are not in arrival order (a 1/40! chance each).
    let mut people_positions = Vec::new();
    for (u, _) in &entered[200..240] {
        people_positions.push(position(&q.position(u).await).unwrap());
    }
    assert!(
        people_positions.windows(2).any(|w| w[0] > w[1]),
        "shuffled within the round"
    );
    q.assert_conserved().await;
}

/// A holder killed half-way through the deal (issue #38): the next holder
/// deals again from the start under the draw's own seed and writes the
/// same seats, so every visitor ends on the place a single holder would
/// have given it. Nobody is placed before the deal is over, nobody twice,
/// and each address still holds exactly one seat a round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deal_cut_off_half_way_is_dealt_again_the_same_by_the_next_holder() {
    const ADDRESSES: u64 = 10;
    const EACH: u64 = 30;
    let redis = RedisServer::start();
    let settings = Settings {
        entry_budget_per_minute: 0,
        ..fast_settings()
    };
    let the_seed = seed();
    // The same pre-queue in two queues: one dealt by one holder, the other
    // by a holder that dies after its first batch, then another.
    let mut places = Vec::new();
    for (name, cut_off) in [("whole", false), ("cut", true)] {
        let q = TestQueue::open(&redis.url(), name, settings.clone()).await;
        schedule(&q, Change::Set(in_ms(60_000)), Change::Keep).await;
        for i in 0..ADDRESSES * EACH {
            let ip = format!("198.18.7.{}", i % ADDRESSES + 1);
            assert!(is_pre_queued_reply(
                &enter_from(&q, &user(i as usize), &ip).await
            ));
        }
        open_now(&q).await;
        let mut run = DrawRun::open(&q, "holder-a", the_seed)
            .await
            .expect("sealed");
        assert!(run.drawing().deal_pending);
        if cut_off {
            // The whole list in one page, then 50 of its new scores written.
            run.step(&q, 50).await;
            run.step(&q, 50).await;
            assert_eq!(
                config_field(&q, cf::DRAW_SHUFFLE).await.as_deref(),
                Some("pending")
            );
            assert_eq!(q.zcard(&q.keys.waiting()).await, 0, "nobody placed yet");
            // Holder A is gone; B offers its own seed, the draw keeps its own.
            run = DrawRun::open(&q, "holder-b", [0xbb; 32])
                .await
                .expect("the same draw");
            assert!(run.drawing().deal_pending);
        }
        run.finish(&q, 50).await;
        assert_eq!(
            config_field(&q, cf::DRAW_SHUFFLE).await.as_deref(),
            Some("dealt")
        );
        assert!(
            !exists(&q, &q.keys.draw_members()).await,
            "the list goes once dealt"
        );
        let mut got = Vec::new();
        for i in 0..ADDRESSES * EACH {
            got.push(position(&q.position(&user(i as usize)).await).expect("placed"));
        }
        let mut sorted = got.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (1..=ADDRESSES * EACH).collect::<Vec<_>>(),
            "each once"
        );
        // Round r is places (r-1)*10+1 ..= r*10: one per address.
        for a in 0..ADDRESSES {
            let mut rounds: Vec<u64> = (0..EACH)
                .map(|k| (got[(k * ADDRESSES + a) as usize] - 1) / ADDRESSES + 1)
                .collect();
            rounds.sort_unstable();
            assert_eq!(rounds, (1..=EACH).collect::<Vec<_>>(), "address {a}");
        }
        q.assert_conserved().await;
        places.push(got);
    }
    assert_eq!(
        places[0], places[1],
        "the same places with and without the cut"
    );
}

async fn hget(q: &TestQueue, key: &str, field: &str) -> Option<i64> {
    let mut conn = q.conn.clone();
    redis::cmd("HGET")
        .arg(key)
        .arg(field)
        .query_async(&mut conn)
        .await
        .expect("HGET")
}

/// The rounds' sizes are the counts the enters kept, every round from 1
/// listed (an empty one as 0): a pre-queued visitor's round and arrival
/// index are its slot, so nobody may leave a pre-queue before the draw
/// (a silent one is not dropped there; it is checked once near the head).
/// Counts that do not add up (a pre-queue some older version wrote, a
/// hand-edited key) give one round, and no slot is signed for the edge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rounds_keep_every_slot_and_counts_that_are_off_give_one_round() {
    let redis = RedisServer::start();
    let settings = Settings {
        entry_budget_per_minute: 0,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "rounds", settings).await;
    schedule(&q, Change::Set(in_ms(60_000)), Change::Keep).await;
    let mut slots = Vec::new();
    for i in 0..3 {
        let r = enter_from(&q, &user(i), "198.18.0.5").await;
        slots.push(pre_slot(&r));
    }
    for i in 3..5 {
        let ip = format!("198.18.1.{i}");
        slots.push(pre_slot(&enter_from(&q, &user(i), &ip).await));
    }
    // Arrival within the address's rounds; the other addresses' firsts
    // are round 1 too, behind the first one.
    let slot = |round, index| Some(DrawSlot { round, index });
    assert_eq!(
        slots,
        [slot(1, 0), slot(2, 0), slot(3, 0), slot(1, 1), slot(1, 2)]
    );
    // Nobody polls for longer than abandon_after, and ticks run: the
    // pre-queue keeps everyone (and a poll reads the same slot back).
    q.set_lock("test").await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    q.admit("test", 0, &[]).await;
    assert_eq!(q.zcard(&q.keys.pre()).await, 5);
    match q.position(&user(2)).await {
        Observed::PreQueue(f) => assert_eq!((f.slot, f.draw), (slot(3, 0), Some(1))),
        other => panic!("{other:?}"),
    }
    open_now(&q).await;
    let run = DrawRun::open(&q, "test", seed()).await.expect("sealed");
    assert_eq!(run.drawing().rounds, [3, 1, 1]);
    assert_eq!(
        config_field(&q, cf::DRAW_NUMBER).await.as_deref(),
        Some("1")
    );

    // The same pre-queue with its counts off: one round, no slots.
    let q = TestQueue::open(&redis.url(), "lost", fast_settings()).await;
    schedule(&q, Change::Set(in_ms(60_000)), Change::Keep).await;
    for i in 0..3 {
        assert!(is_pre_queued_reply(
            &enter_from(&q, &user(i), "198.18.0.5").await
        ));
    }
    let mut conn = q.conn.clone();
    let _: () = redis::cmd("HSET")
        .arg(q.keys.groups())
        .arg("#1")
        .arg(7)
        .query_async(&mut conn)
        .await
        .expect("HSET");
    open_now(&q).await;
    let run = DrawRun::open(&q, "test", seed()).await.expect("sealed");
    assert_eq!(run.drawing().rounds, [3]);
    assert_eq!(config_field(&q, cf::DRAW_ROUNDS).await.as_deref(), Some(""));
}

/// The draw slot a pre-queue reply holds.
fn pre_slot(r: &EnterReply) -> Option<DrawSlot> {
    match r {
        EnterReply::Entered(Observed::PreQueue(f)) => f.slot,
        other => panic!("{other:?}"),
    }
}

/// `entry_places_per_address`: an address group holds at most that many
/// live places (pre-queued, drawn, waiting); one more is refused with only
/// the counter written, and a place that ends (admitted here) makes room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_holds_at_most_entry_places_per_address_live_places() {
    let redis = RedisServer::start();
    let settings = Settings {
        entry_budget_per_minute: 0,
        entry_places_per_address: 3,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "capped", settings).await;
    schedule(&q, Change::Set(in_ms(60_000)), Change::Keep).await;
    for i in 0..3 {
        assert!(is_pre_queued_reply(
            &enter_from(&q, &user(i), "198.18.0.9").await
        ));
    }
    // A refresh of a held place is free; a fourth identity is refused.
    assert!(is_pre_queued_reply(
        &enter_from(&q, &user(0), "198.18.0.9").await
    ));
    let before = q.snapshot().await;
    assert_eq!(
        enter_from(&q, &user(3), "198.18.0.9").await,
        EnterReply::Refused(Refusal::AddressFull { cap: 3 })
    );
    let after = q.snapshot().await;
    let changed: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    // The counter, and the hold that spares the next second's refusals
    // the count (`full:<group>` in the guard hash).
    assert_eq!(
        changed,
        [&q.keys.guard(), &q.keys.stats()],
        "only the counter and the hold moved"
    );
    assert_eq!(q.stat(sf::REFUSED_ADDRESS_FULL).await, 1);
    let held = q.snapshot().await;
    assert_eq!(
        enter_from(&q, &user(3), "198.18.0.9").await,
        EnterReply::Refused(Refusal::AddressFull { cap: 3 })
    );
    let again = q.snapshot().await;
    let changed: Vec<&String> = again
        .keys()
        .filter(|k| held.get(*k) != again.get(*k))
        .collect();
    assert_eq!(changed, [&q.keys.stats()], "held: the counter alone");
    // Another address is not held back; the cap counts the /64 of IPv6.
    assert!(is_pre_queued_reply(
        &enter_from(&q, &user(4), "198.18.0.10").await
    ));
    for i in 5..8 {
        let reply = enter_from(&q, &user(i), &format!("2001:db8:9:1::{i}")).await;
        assert!(is_pre_queued_reply(&reply), "{reply:?}");
    }
    assert_eq!(
        enter_from(&q, &user(8), "2001:db8:9:1::ff").await,
        EnterReply::Refused(Refusal::AddressFull { cap: 3 })
    );

    // The draw places them; still live in line, still counted.
    open_now(&q).await;
    DrawRun::open(&q, "test", seed())
        .await
        .expect("sealed")
        .finish(&q, 10)
        .await;
    assert_eq!(
        enter_from(&q, &user(3), "198.18.0.9").await,
        EnterReply::Refused(Refusal::AddressFull { cap: 3 })
    );
    // Admit everyone in line: no live place is left, so room again once
    // the hold (one second) has passed.
    q.set_lock("test").await;
    q.admit("test", 20, &grants(20, 0)).await;
    assert_eq!(q.zcard(&q.keys.waiting()).await, 0);
    tokio::time::sleep(Duration::from_millis(ADDRESS_FULL_HOLD_MS + 100)).await;
    assert!(entered_position(&enter_from(&q, &user(3), "198.18.0.9").await).is_some());
}

/// Nobody leaves a pre-queue for silence: the draw places everyone and
/// gives each a grace of `abandon_after` from its placement; a visitor who
/// left is then dropped near the head, never admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_queued_visitors_who_left_are_placed_then_dropped_before_admission() {
    let redis = RedisServer::start();
    // Leavers go after 1–1.25 s without a poll.
    let q = TestQueue::open(&redis.url(), "leavers", fast_settings()).await;
    schedule(&q, Change::Set(in_ms(60_000)), Change::Keep).await;
    for i in 0..10 {
        assert!(matches!(
            q.enter(&user(i)).await,
            EnterReply::Entered(Observed::PreQueue(_))
        ));
    }
    open_now(&q).await;
    let mut run = DrawRun::open(&q, "test", seed()).await.expect("sealed");
    run.finish(&q, 3).await;
    assert_eq!((run.placed(), run.dropped()), (10, 0));
    assert_eq!(q.stat(sf::DRAWN).await, 10);
    // Users 8 and 9 never poll again; the others keep polling past the
    // grace, while ticks run (no admission: max_active is reached).
    let until = Instant::now() + Duration::from_millis(1_800);
    while Instant::now() < until {
        for i in 0..8 {
            assert!(position(&q.position(&user(i)).await).is_some());
        }
        q.admit("test", 0, &[]).await;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    q.admit("test", 0, &[]).await;
    for i in 8..10 {
        assert_eq!(score(&q, &q.keys.waiting(), &user(i)).await, None);
        assert_eq!(
            q.position(&user(i)).await,
            Observed::Settled(UserState::Abandoned)
        );
    }
    q.admit("test", 20, &grants(20, 0)).await;
    for i in 0..8 {
        assert!(
            matches!(
                q.position(&user(i)).await,
                Observed::Settled(UserState::Admitted { .. })
            ),
            "user {i}"
        );
    }
    assert_eq!(q.stat(sf::ADMITTED).await, 8);
    assert_eq!(q.stat(sf::ABANDONED).await, 2);
    q.assert_conserved().await;
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// A scheduler for queue `id` with settings `s`.
fn scheduler_for(redis: &RedisServer, id: &str, s: &Settings) -> SchedulerBuilder {
    Scheduler::builder(&redis.url()).queue_settings(id, s)
}

/// The pid in a lease owner id `host/pid/nonce`.
fn pid_of(owner: &str) -> Option<u32> {
    owner.split('/').nth(1)?.parse().ok()
}

/// `draw_left`, `draw_done`, `draw_seed` and the lease holder, in one read.
async fn draw_progress(q: &TestQueue) -> (u64, u64, Option<String>, Option<String>) {
    let mut conn = q.conn.clone();
    let (fields, holder): (Vec<Option<String>>, Option<String>) = redis::pipe()
        .cmd("HMGET")
        .arg(q.keys.config())
        .arg(cf::DRAW_LEFT)
        .arg(cf::DRAW_DONE)
        .arg(cf::DRAW_SEED)
        .get(q.keys.lock())
        .query_async(&mut conn)
        .await
        .expect("read the draw");
    let num = |i: usize| {
        fields[i]
            .as_deref()
            .map_or(0, |v| v.parse().expect("a count"))
    };
    (num(0), num(1), fields[2].clone(), holder)
}

#[test]
fn kill_9_during_a_draw_of_20000_places_everyone_exactly_once() {
    const N: usize = 20_000;
    const KILLS: usize = 8;
    let rt = runtime();
    let redis = RedisServer::start();
    // Short ticks and lease so crash hand-overs take ~0.5 s; batches of 10
    // make the draw 2,000 calls; paused, so nobody is admitted after it
    // and the line can be counted.
    let settings = Settings {
        tick_ms: 50,
        lease_ttl_ms: 450,
        draw_batch: 10,
        abandon_after_ms: 600_000,
        status_ttl_ms: 1_200_000,
        ..Settings::default()
    };
    let q = rt.block_on(async {
        let q = TestQueue::open(&redis.url(), "drop", settings.clone()).await;
        let paused = q
            .run(&SetState {
                keys: &q.keys,
                state: QueueState::Paused,
                expect: None,
            })
            .await
            .unwrap();
        assert!(matches!(paused, StateSwitch::Switched(_)));
        schedule(&q, Change::Set(in_ms(3_600_000)), Change::Keep).await;
        q
    });
    let users: Vec<UserId> = (0..N).map(user).collect();
    let filled = Instant::now();
    rt.block_on(enter_pipelined(&q, &users));
    let fill_time = filled.elapsed();
    assert_eq!(rt.block_on(q.zcard(&q.keys.pre())), N as u64);

    let b = scheduler_for(&redis, "drop", &settings).redis_option("response_timeout_ms", "150");
    let mut fleet: Vec<Scheduler> = vec![b.clone().start(), b.clone().start()];
    assert!(wait_until(Duration::from_secs(10), || rt
        .block_on(draw_progress(&q))
        .3
        .is_some()));

    rt.block_on(open_now(&q));
    let opened = Instant::now();
    let mut rng = since_epoch().as_nanos() as u64 | 1;
    let (mut kills, mut last_done, mut seed) = (0, 0, None::<String>);
    while kills < KILLS {
        // A live holder makes progress (or the draw is over) ...
        let mut now = (0, 0, None, None);
        let moved = wait_until(Duration::from_secs(15), || {
            now = rt.block_on(draw_progress(&q));
            now.1 > last_done || (now.0 == 0 && now.2.is_some() && now.1 > 0)
        });
        assert!(moved, "the draw stalled at {last_done} after {kills} kills");
        let (left, _, drawn_seed, _) = now.clone();
        if let Some(s) = &drawn_seed {
            assert_eq!(seed.get_or_insert_with(|| s.clone()), s, "the seed changed");
        }
        if left == 0 {
            break;
        }
        // ... and is killed somewhere in its next few batches.
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(rng % 40));
        let (left, _, _, holder) = rt.block_on(draw_progress(&q));
        if left == 0 {
            break;
        }
        let pid = holder.as_deref().and_then(pid_of);
        let Some(i) = fleet.iter().position(|s| pid.is_some() && s.pid() == pid) else {
            continue;
        };
        fleet.remove(i).kill();
        kills += 1;
        last_done = rt.block_on(draw_progress(&q)).1;
        fleet.push(b.clone().start());
    }
    // The last holder finishes alone.
    let (last_kill, placed_then) = (Instant::now(), last_done);
    assert!(
        wait_until(Duration::from_secs(30), || rt.block_on(draw_progress(&q)).0
            == 0),
        "the draw did not finish after the last kill"
    );
    let (took, tail) = (opened.elapsed(), last_kill.elapsed());
    for s in &mut fleet {
        s.sigterm();
        assert_eq!(s.wait_exit(Duration::from_secs(10)), Some(0), "{}", s.log());
    }

    rt.block_on(async {
        assert!(!exists(&q, &q.keys.draw()).await, "the draw is over");
        assert!(!exists(&q, &q.keys.pre()).await);
        let (left, done, last_seed, _) = draw_progress(&q).await;
        assert_eq!((left, done), (0, N as u64));
        assert_eq!(
            last_seed, seed,
            "one seed from the first holder to the last"
        );
        assert_eq!(q.stat(sf::DRAWN).await, N as i64, "nobody placed twice");
        assert_eq!(q.stat(sf::ABANDONED).await, 0);
        assert_eq!(q.zcard(&q.keys.waiting()).await, N as u64);
        let field = |name| {
            let q = q.clone();
            async move {
                config_field(&q, name)
                    .await
                    .unwrap()
                    .parse::<u64>()
                    .unwrap()
            }
        };
        let (base, end) = (field(cf::DRAW_BASE).await, field(cf::DRAW_END).await);
        assert_eq!(end - base, N as u64, "the reserved range");
        let tickets: Vec<u64> = scores(&q, &q.keys.waiting(), &users)
            .await
            .into_iter()
            .enumerate()
            .map(|(i, t)| t.unwrap_or_else(|| panic!("user {i} is not in line")))
            .collect();
        let mut sorted = tickets.clone();
        sorted.sort_unstable();
        assert_eq!(
            sorted,
            (base + 1..=base + N as u64).collect::<Vec<_>>(),
            "each ticket of (draw_base, draw_end] exactly once"
        );
        let arrival: Vec<u64> = (0..N as u64).collect();
        let rho = spearman(&arrival, &tickets);
        eprintln!(
            "{N} pre-queued in {fill_time:?}; drawn in {took:?} (batches of {}) \
             through {kills} kill -9s, the last {} after the last kill in {tail:?}; \
             Spearman ρ = {rho:.4}",
            settings.draw_batch,
            N as u64 - placed_then
        );
        assert!(rho.abs() < 0.05, "ρ = {rho}");
        q.assert_conserved().await;
    });
    assert_eq!(kills, KILLS, "kills landed during the draw");
}

/// Enter with a fresh token: idle passthrough may admit at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schedule_command_and_the_config_file_set_the_opening() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("scheduler.toml");
    let text = Scheduler::builder(&redis.url())
        .queue("main", &[])
        .config_text(
            queuegate_testkit::free_port(),
            queuegate_testkit::free_port(),
        );
    std::fs::write(&config, text).unwrap();
    let q = TestQueue {
        keys: QueueKeys::new(&Prefix::default(), &QueueId::new("main").unwrap()),
        settings: Settings::default(),
        conn: redis::Client::open(redis.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap(),
    };
    let cli = |args: &[&str]| {
        let out = scheduler::command(&config, args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let at = |t: &str| {
        queuegate_scheduler::config::parse_time(t)
            .unwrap()
            .to_string()
    };

    let (code, out) = cli(&["schedule", "main", "--opens-at", "2030-01-01T00:00:00Z"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("opens at 2030-01-01T00:00:00Z"), "{out}");
    assert_eq!(
        config_field(&q, cf::OPENS_AT).await,
        Some(at("2030-01-01T00:00:00Z"))
    );
    let (code, out) = cli(&["schedule", "--closes-at", "2030-01-01T03:00:00+01:00"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        config_field(&q, cf::CLOSES_AT).await,
        Some(at("2030-01-01T02:00:00Z"))
    );
    assert_eq!(
        config_field(&q, cf::OPENS_AT).await,
        Some(at("2030-01-01T00:00:00Z")),
        "kept"
    );

    // Bad times exit 2 and change nothing.
    let before = q.snapshot().await;
    for args in [
        &["schedule", "main", "--opens-at", "tomorrow"][..],
        &["schedule", "main", "--opens-at", "2030-01-01T00:00:00"][..],
        &[
            "schedule",
            "main",
            "--opens-at",
            "2030-01-02T00:00:00Z",
            "--closes-at",
            "2030-01-01T00:00:00Z",
        ][..],
        &["schedule", "main"][..],
    ] {
        let (code, out) = cli(args);
        assert_eq!(code, Some(2), "{args:?}: {out}");
    }
    assert_eq!(q.snapshot().await, before);

    let (code, out) = cli(&["schedule", "main", "--clear"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(config_field(&q, cf::OPENS_AT).await, None);
    assert_eq!(config_field(&q, cf::CLOSES_AT).await, None);

    // A [[queue]]'s opens_at is published by the scheduler that holds it.
    let sched = Scheduler::builder(&redis.url())
        .queue("filed", &[("opens_at", "2030-01-01T00:00:00Z")])
        .start();
    let filed = TestQueue {
        keys: QueueKeys::new(&Prefix::default(), &QueueId::new("filed").unwrap()),
        ..q.clone()
    };
    let seen = eventually(Duration::from_secs(10), || async {
        config_field(&filed, cf::OPENS_AT).await.is_some()
    })
    .await;
    assert!(seen, "{}", sched.log());
    assert_eq!(
        config_field(&filed, cf::OPENS_AT).await,
        Some(at("2030-01-01T00:00:00Z"))
    );
}
