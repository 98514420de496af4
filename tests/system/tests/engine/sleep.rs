//! Sleep grace (docs/engine.md, *Sleep grace*): a visitor whose phone
//! sleeps keeps its place for `sleep_grace_ms`; when its turn comes
//! meanwhile the line goes on past it into a claim, honoured ahead of the
//! line when it polls again within the grace; silent longer, it is dropped.
//!
//! The defaults (abandon 90 s, grace 5 min, a phone silent 4 min) are
//! scaled down 60 times through the settings so a test runs in seconds:
//! abandon 1.5 s, grace 5 s, silent 4 s ([`scaled`]). One test checks the
//! default 5 minutes themselves, at the scripts' level, by writing the
//! liveness bits a poll 4 and 6⅔ minutes ago would have left.

use std::time::{Duration, Instant};

use queuegate_shared::fields::{stats as sf, status as st};
use queuegate_shared::guard::{ClientAddress, EntryGuard};
use queuegate_shared::keys::name;
use queuegate_shared::ops::{
    AdmitCounts, AdmitReply, Enter, EnterReply, Observed, Pass, PassReply, QueueNeeded, Refusal,
    Revoke, RevokeCall, RevokeReply, RouteKind, SetState, VisitorRead, VisitorRecords,
};
use queuegate_shared::state::UserState;
use queuegate_shared::token::EntryToken;
use queuegate_shared::{QueueState, Settings, UserId};
use queuegate_system_tests::{grants, user, TestQueue};
use queuegate_testkit::RedisServer;

/// The defaults' proportions, 60 times faster: abandon 90 s → 1.5 s, sleep
/// grace 5 min → 5 s (poll_max at most half the abandon timeout).
fn scaled() -> Settings {
    Settings {
        abandon_after_ms: 1_500,
        sleep_grace_ms: 5_000,
        poll_min_ms: 100,
        poll_max_ms: 750,
        ..Settings::default()
    }
}

/// A phone silent 4 minutes at the defaults' scale.
const SILENT_4_MIN: Duration = Duration::from_millis(4_000);

/// Past any liveness: a silent visitor is not alive after 1.25 × the
/// abandon timeout (1.875 s at this scale).
const PAST_ABANDON: Duration = Duration::from_millis(2_200);

/// Past any grace: silent longer than 1.25 × the grace (6.25 s).
const PAST_GRACE: Duration = Duration::from_millis(6_700);

const POLL_EVERY: Duration = Duration::from_millis(250);

async fn open_paused(redis: &RedisServer, queue: &str, settings: Settings, n: usize) -> TestQueue {
    let q = TestQueue::open(&redis.url(), queue, settings).await;
    q.set_lock("me").await;
    set_state(&q, QueueState::Paused).await;
    for i in 0..n {
        q.enter(&user(i)).await;
    }
    q
}

async fn set_state(q: &TestQueue, state: QueueState) {
    q.run(&SetState {
        keys: &q.keys,
        state,
        expect: None,
    })
    .await
    .expect("set state");
}

async fn tick(q: &TestQueue, allowance: u64) -> AdmitCounts {
    match q
        .admit("me", allowance, &grants(allowance as usize, 0))
        .await
    {
        AdmitReply::Ran(c) => c,
        AdmitReply::NotOwner => panic!("not the lease owner"),
    }
}

async fn lookup(q: &TestQueue, u: &UserId) -> VisitorRecords {
    q.run(&VisitorRead {
        keys: &q.keys,
        user: u,
    })
    .await
    .expect("visitor lookup")
}

fn position(o: &Observed) -> Option<u64> {
    match o {
        Observed::Waiting(w) => Some(w.position),
        _ => None,
    }
}

fn is_admitted(o: &Observed) -> bool {
    matches!(o, Observed::Settled(UserState::Admitted { .. }))
}

/// Until `until`, every POLL_EVERY: the users `live` poll (as pages do)
/// and, when `allowance` is some, a tick runs. Returns the ticks' counts
/// summed.
async fn keep_polling(
    q: &TestQueue,
    live: &[usize],
    until: Instant,
    allowance: Option<u64>,
) -> (u64, u64) {
    let (mut admitted, mut abandoned) = (0, 0);
    while Instant::now() < until {
        for &i in live {
            q.position(&user(i)).await;
        }
        if let Some(n) = allowance {
            let c = tick(q, n).await;
            admitted += c.admitted;
            abandoned += c.abandoned;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    (admitted, abandoned)
}

/// The issue's first case: silent 4 minutes (scaled) near the head, a
/// visitor keeps its place; its turn comes while it is away, the line goes
/// on past it, and back within the grace it is admitted ahead of the line.
#[tokio::test]
async fn a_visitor_silent_four_minutes_near_the_head_keeps_its_place_and_is_admitted_on_return() {
    let redis = RedisServer::shared();
    let q = open_paused(redis, "sleep-back", scaled(), 20).await;
    let asleep = user(2);
    let slept_at = Instant::now();
    let live: Vec<usize> = (0..20).filter(|&i| i != 2).collect();
    // Paused, the ticks only sweep and scan: past the abandon timeout the
    // sleeper is kept (before the grace the scan dropped it here).
    let (_, abandoned) = keep_polling(&q, &live, slept_at + PAST_ABANDON, Some(5)).await;
    assert_eq!(abandoned, 0);
    assert_eq!(lookup(&q, &asleep).await.rank, Some(2), "third in line");

    // Its turn comes while it sleeps: passed over, no slot, no token.
    set_state(&q, QueueState::Open).await;
    let c = tick(&q, 3).await;
    assert_eq!(
        (c.admitted, c.claimed, c.claims, c.abandoned),
        (3, 1, 1, 0),
        "{c:?}"
    );
    let r = lookup(&q, &asleep).await;
    assert_eq!(r.rank, None, "out of the line");
    assert!(r.ticket.is_some(), "its ticket is kept with the claim");
    assert_eq!(r.status.map(|s| s.kind), Some(st::CLAIMED.to_string()));
    q.assert_conserved().await;

    // The line goes on without it.
    let live: Vec<usize> = (4..20).collect();
    let (admitted, abandoned) = keep_polling(&q, &live, slept_at + SILENT_4_MIN, Some(1)).await;
    assert!(admitted >= 5, "the line went on: {admitted}");
    assert_eq!(abandoned, 0);

    // Back after 4 minutes (scaled): first in line, admitted next tick,
    // ahead of everyone still waiting.
    let mut head = None;
    for i in 4..20 {
        if lookup(&q, &user(i)).await.rank == Some(0) {
            head = Some(user(i));
            break;
        }
    }
    let head = head.expect("someone still waits");
    assert!(
        slept_at.elapsed() < Duration::from_millis(4_800),
        "the machine stalled"
    );
    let back = q.position(&asleep).await;
    assert_eq!(position(&back), Some(1), "{back:?}");
    let before = position(&q.position(&head).await);
    assert_eq!(before, Some(2), "the head is one back behind the returner");
    let c = tick(&q, 1).await;
    assert_eq!((c.admitted, c.claims), (1, 0), "{c:?}");
    assert!(is_admitted(&q.position(&asleep).await));
    assert_eq!(position(&q.position(&head).await), Some(1));
    let history: Vec<String> = lookup(&q, &asleep)
        .await
        .history
        .into_iter()
        .map(|h| h.kind)
        .collect();
    assert_eq!(history, [st::CLAIMED, st::RETURNED, st::ISSUED]);
    assert_eq!(q.stat(sf::ABANDONED).await, 0);
    q.assert_conserved().await;
}

/// The issue's second case: silent longer than the grace, a visitor is
/// dropped: a claim taken up too late answers abandoned, an unclaimed one
/// is swept, and a sleeper still in line is dropped by the rolling scan.
#[tokio::test]
async fn a_visitor_silent_past_the_grace_is_dropped() {
    let redis = RedisServer::shared();
    let q = open_paused(redis, "sleep-gone", scaled(), 14).await;
    // 1 and 2 sleep at the head; 8 sleeps further back.
    let sleepers = [1, 2, 8];
    let live: Vec<usize> = (0..14).filter(|i| !sleepers.contains(i)).collect();
    let slept_at = Instant::now();
    keep_polling(&q, &live, slept_at + PAST_ABANDON, Some(5)).await;
    set_state(&q, QueueState::Open).await;
    let c = tick(&q, 2).await;
    assert_eq!((c.admitted, c.claimed, c.abandoned), (2, 2, 0), "{c:?}");
    // Within the grace, paused again: every sleeper keeps what it has.
    set_state(&q, QueueState::Paused).await;
    let live: Vec<usize> = live.into_iter().filter(|&i| i > 3).collect();
    let (_, abandoned) = keep_polling(&q, &live, slept_at + SILENT_4_MIN, Some(5)).await;
    assert_eq!(abandoned, 0, "nobody dropped within the grace");
    assert!(lookup(&q, &user(8)).await.rank.is_some());
    assert_eq!(q.zcard(&q.keys.claims()).await, 2);

    // Past the grace, with no tick meanwhile: the claim taken up too late
    // is dropped right there.
    keep_polling(&q, &live, slept_at + PAST_GRACE, None).await;
    assert_eq!(
        q.position(&user(1)).await,
        Observed::Settled(UserState::Abandoned)
    );
    // The tick sweeps the other claim and scans the line (the lease ran
    // out while nobody ticked: take it again).
    q.set_lock("me").await;
    let c = tick(&q, 5).await;
    assert_eq!((c.abandoned, c.claims), (2, 0), "{c:?}");
    for i in [2, 8] {
        assert_eq!(
            q.position(&user(i)).await,
            Observed::Settled(UserState::Abandoned),
            "{i}"
        );
    }
    // The rest count live visitors only.
    for (expected, &i) in live.iter().enumerate() {
        assert_eq!(
            position(&q.position(&user(i)).await),
            Some(expected as u64 + 1),
            "{i}"
        );
    }
    assert_eq!(q.stat(sf::ABANDONED).await, 3);
    q.assert_conserved().await;
}

/// The defaults themselves, at the scripts' level: a visitor whose last
/// poll was 4 minutes ago is passed over into a claim and admitted on
/// return; one whose last poll was 6⅔ minutes ago (past 1.25 × 5 min, the
/// latest a grace of 5 minutes can last) is dropped. The bits are written
/// where such polls would have left them: the `grace:` bitmaps, one per
/// quarter of the grace, named by that width (docs/engine.md).
#[tokio::test]
async fn at_the_defaults_four_minutes_asleep_keeps_a_claim_and_six_and_two_thirds_do_not() {
    let s = Settings::default();
    assert_eq!((s.abandon_after_ms, s.sleep_grace()), (90_000, 300_000));
    let redis = RedisServer::shared();
    let q = open_paused(redis, "sleep-default", s.clone(), 4).await;
    let mut conn = q.conn.clone();
    // Forget every poll, then give each visitor its last one.
    for family in [name::SEEN, name::GRACE] {
        let pattern = format!("{}{family}*", q.keys.base());
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(!keys.is_empty(), "enter marks {family}");
        let _: () = redis::cmd("DEL")
            .arg(&keys)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
    let now = secs * 1_000 + micros / 1_000;
    let width = s.sleep_grace() / 4;
    for (u, ago_ms) in [(1, 240_000), (2, 400_000)] {
        let ticket = lookup(&q, &user(u)).await.ticket.expect("in line");
        let key = format!(
            "{}{}{width}:{}:{}",
            q.keys.base(),
            name::GRACE,
            (now - ago_ms) / width,
            ticket / (1 << 20)
        );
        let _: () = redis::cmd("SETBIT")
            .arg(&key)
            .arg(ticket % (1 << 20))
            .arg(1)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    for u in [0, 3] {
        q.position(&user(u)).await;
    }
    set_state(&q, QueueState::Open).await;
    let c = tick(&q, 3).await;
    assert_eq!((c.admitted, c.claimed, c.abandoned), (2, 1, 1), "{c:?}");
    assert_eq!(
        lookup(&q, &user(1)).await.status.map(|s| s.kind),
        Some(st::CLAIMED.to_string())
    );
    assert_eq!(
        q.position(&user(2)).await,
        Observed::Settled(UserState::Abandoned)
    );
    assert_eq!(position(&q.position(&user(1)).await), Some(1));
    let c = tick(&q, 3).await;
    assert_eq!((c.admitted, c.claims), (1, 0), "{c:?}");
    assert!(is_admitted(&q.position(&user(1)).await));
    q.assert_conserved().await;
}

/// A claim is a place: `enter` takes it up as `position` does (a reloaded
/// page), and an operator's revocation ends it (counted as withdrawn).
#[tokio::test]
async fn enter_takes_a_claim_up_and_a_revocation_ends_one() {
    let redis = RedisServer::shared();
    let q = open_paused(redis, "sleep-ops", scaled(), 6).await;
    let slept_at = Instant::now();
    keep_polling(&q, &[0, 3, 4, 5], slept_at + PAST_ABANDON, None).await;
    set_state(&q, QueueState::Open).await;
    let c = tick(&q, 2).await;
    assert_eq!((c.admitted, c.claimed), (2, 2), "{c:?}");
    let ticket = lookup(&q, &user(1)).await.ticket;

    let revoked = q
        .run(&Revoke {
            keys: &q.keys,
            user: &user(2),
            call: RevokeCall::Revoke { for_ms: 60_000 },
        })
        .await
        .unwrap();
    assert_eq!(
        revoked,
        RevokeReply::Revoked {
            was: "waiting".into()
        }
    );
    assert_eq!(q.stat(sf::WITHDRAWN).await, 1);
    assert_eq!(
        q.position(&user(2)).await,
        Observed::Settled(UserState::Revoked)
    );

    let EnterReply::Entered(back) = q.enter(&user(1)).await else {
        panic!("enter refused a claim");
    };
    assert_eq!(position(&back), Some(1), "{back:?}");
    assert_eq!(lookup(&q, &user(1)).await.ticket, ticket, "its own ticket");
    assert_eq!(q.stat(sf::ENTERED).await, 6, "no new place");
    let c = tick(&q, 1).await;
    assert_eq!((c.admitted, c.claims), (1, 0), "{c:?}");
    assert!(is_admitted(&q.position(&user(1)).await));
    q.assert_conserved().await;
}

/// Enters `u` from `address`.
async fn enter_from(q: &TestQueue, u: &UserId, address: &ClientAddress) -> EnterReply {
    q.run(&Enter {
        keys: &q.keys,
        user: u,
        guard: EntryGuard {
            address: Some(address),
            solution: None,
            missing: None,
        },
        token: None,
    })
    .await
    .expect("enter")
}

/// `entry_places_per_address` counts a claim as a live place: an address
/// at its cap cannot let its places go silent at the head and take new
/// ones while they sit in claims.
#[tokio::test]
async fn a_claim_counts_toward_the_places_of_its_address() {
    let redis = RedisServer::shared();
    let settings = Settings {
        entry_places_per_address: 1,
        ..scaled()
    };
    let q = TestQueue::open(&redis.url(), "sleep-cap", settings).await;
    q.set_lock("me").await;
    set_state(&q, QueueState::Paused).await;
    let home = ClientAddress::parse("203.0.113.7").expect("address");
    assert!(matches!(
        enter_from(&q, &user(0), &home).await,
        EnterReply::Entered(Observed::Waiting(_))
    ));
    let slept_at = Instant::now();
    tokio::time::sleep(PAST_ABANDON).await;
    set_state(&q, QueueState::Open).await;
    q.set_lock("me").await;
    let c = tick(&q, 1).await;
    assert_eq!((c.admitted, c.claimed), (0, 1), "{c:?}");
    assert_eq!(
        enter_from(&q, &user(1), &home).await,
        EnterReply::Refused(Refusal::AddressFull { cap: 1 })
    );
    // The line is empty, so the gate's idle passthrough lets others
    // through, but not the claim's holder: its place is in line.
    let pass = |u: usize| {
        let q = q.clone();
        async move {
            q.run(&Pass {
                keys: &q.keys,
                user: &user(u),
                token: &EntryToken::from_random([u as u8; 16]),
                address: None,
                route: RouteKind::Spend,
            })
            .await
            .expect("pass")
        }
    };
    assert_eq!(pass(0).await, PassReply::Queue(QueueNeeded::Waiting));
    assert!(matches!(pass(2).await, PassReply::Passed { .. }));
    // Its holder still takes it up.
    assert!(slept_at.elapsed() < Duration::from_millis(4_800));
    let EnterReply::Entered(back) = enter_from(&q, &user(0), &home).await else {
        panic!("the claim's holder refused");
    };
    assert_eq!(position(&back), Some(1));
    q.assert_conserved().await;
}

/// The randomized run of `line.rs` with a sleep grace short enough that its
/// users' gaps between requests (some hundreds of ms) put some of them to
/// sleep at the head: claims are made and taken up, and every counter
/// identity and every user's one state hold throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_randomized_run_with_sleepers_conserves_every_user() {
    let settings = Settings {
        max_active: 15,
        max_waiting: 120,
        abandon_after_ms: 200,
        sleep_grace_ms: 800,
        poll_min_ms: 50,
        poll_max_ms: 100,
        ..queuegate_system_tests::fast_settings()
    };
    let claimed = crate::line::randomized_run("random-sleep", settings).await;
    eprintln!("{claimed} passed over into claims");
    assert!(claimed > 0, "nobody slept at the head");
}
