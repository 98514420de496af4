//! The queue engine (shared/lua + shared/src/ops) against a real
//! redis-server: FIFO, limits, every user state, token safety, admission
//! safety under racing admitters, leavers, leases and conservation.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use queuegate_shared::ops::{
    AdmitReply, ConsumeReply, EnterReply, LeaseAcquire, LeaseRelease, Observed, Outcome, SetState,
    SettleReply, StateSwitch,
};
use queuegate_shared::state::UserState;
use queuegate_shared::token::EntryToken;
use queuegate_shared::{QueueState, Settings, UserId};
use queuegate_system_tests::{fast_settings, grants, user, TestQueue};
use queuegate_testkit::RedisServer;

fn waiting_position(o: &Observed) -> Option<u64> {
    match o {
        Observed::Waiting(w) => Some(w.position),
        _ => None,
    }
}

fn entered_position(r: &EnterReply) -> Option<u64> {
    match r {
        EnterReply::Entered(o) => waiting_position(o),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifo_is_exact_under_1000_concurrent_enters_and_refresh_never_moves_anyone() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "fifo", Settings::default()).await;
    let n = 1_000;
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move { (i, q.enter(&user(i)).await) })
        })
        .collect();
    let mut first_positions = BTreeMap::new();
    for t in tasks {
        let (i, reply) = t.await.unwrap();
        first_positions.insert(i, entered_position(&reply).expect("waiting"));
    }
    // Positions at entry are a permutation of 1..=n ...
    let mut seen: Vec<u64> = first_positions.values().copied().collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=n as u64).collect::<Vec<_>>());

    // ... in ticket order, and a refresh (enter again) keeps the place.
    let mut conn = q.conn.clone();
    for i in (0..n).step_by(7) {
        let ticket: f64 = redis::cmd("ZSCORE")
            .arg(q.keys.waiting())
            .arg(user(i).as_str())
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(ticket as u64, first_positions[&i], "user {i}");
        let again = q.enter(&user(i)).await;
        assert_eq!(
            entered_position(&again),
            Some(first_positions[&i]),
            "refresh moved user {i}"
        );
        assert_eq!(
            waiting_position(&q.position(&user(i)).await),
            Some(first_positions[&i])
        );
    }
    assert_eq!(
        q.stat("entered").await,
        n as i64,
        "refreshes take no ticket"
    );
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn max_waiting_holds_under_concurrent_enters() {
    let redis = RedisServer::shared();
    let settings = Settings {
        max_waiting: 100,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "small", settings).await;
    let tasks: Vec<_> = (0..300)
        .map(|i| {
            let q = q.clone();
            tokio::spawn(async move { q.enter(&user(i)).await })
        })
        .collect();
    let (mut entered, mut full) = (0, 0);
    for t in tasks {
        match t.await.unwrap() {
            EnterReply::Entered(_) => entered += 1,
            EnterReply::Full {
                waiting,
                max_waiting,
            } => {
                assert_eq!((waiting, max_waiting), (100, 100));
                full += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((entered, full), (100, 200));
    assert_eq!(q.zcard(&q.keys.waiting()).await, 100);
    q.assert_conserved().await;
}

#[tokio::test]
async fn closed_draining_paused_and_unconfigured_queues() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "ops", Settings::default()).await;
    let set = |state| {
        let q = q.clone();
        async move {
            q.run(&SetState {
                keys: &q.keys,
                state,
                expect: None,
            })
            .await
            .unwrap()
        }
    };
    assert!(entered_position(&q.enter(&user(1)).await).is_some());
    assert_eq!(
        set(QueueState::Closed).await,
        StateSwitch::Switched(Some(QueueState::Open))
    );
    assert_eq!(
        q.enter(&user(2)).await,
        EnterReply::Closed(Some(QueueState::Closed))
    );
    // A waiting user keeps their place and can still poll a closed queue.
    assert_eq!(entered_position(&q.enter(&user(1)).await), Some(1));
    q.set_lock("me").await;
    match q.admit("me", 10, &grants(10, 0)).await {
        AdmitReply::Ran(c) => assert!(!c.admitting && c.admitted == 0, "{c:?}"),
        other => panic!("{other:?}"),
    }
    set(QueueState::Draining).await;
    assert_eq!(
        q.enter(&user(2)).await,
        EnterReply::Closed(Some(QueueState::Draining))
    );
    match q.admit("me", 10, &grants(10, 0)).await {
        AdmitReply::Ran(c) => assert_eq!(c.admitted, 1, "draining still admits"),
        other => panic!("{other:?}"),
    }
    set(QueueState::Paused).await;
    match q.enter(&user(3)).await {
        EnterReply::Entered(Observed::Waiting(w)) => {
            assert_eq!(w.queue_state, Some(QueueState::Paused));
            let state = Observed::Waiting(w).into_user_state(&Settings::default(), 0.0);
            let json = serde_json::to_value(&state).unwrap();
            assert!(
                json.get("etaSeconds").is_none(),
                "no ETA while paused: {json}"
            );
        }
        other => panic!("{other:?}"),
    }

    // A queue no scheduler has configured refuses entries.
    let keys = queuegate_shared::QueueKeys::new(
        &queuegate_shared::Prefix::default(),
        &queuegate_shared::QueueId::new("never").unwrap(),
    );
    let other = TestQueue { keys, ..q.clone() };
    assert_eq!(other.enter(&user(1)).await, EnterReply::Closed(None));
}

#[tokio::test]
async fn every_user_state_is_reachable_and_told_apart() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "states", fast_settings()).await;
    q.set_lock("me").await;
    let (orderer, expirer, leaver, waiter, stranger) =
        (user(1), user(2), user(3), user(4), user(9));

    assert_eq!(
        q.position(&stranger).await,
        Observed::Settled(UserState::NotInQueue)
    );
    for u in [&orderer, &expirer, &leaver] {
        q.enter(u).await;
    }
    assert_eq!(waiting_position(&q.position(&orderer).await), Some(1));

    // Admit two; the third keeps waiting.
    match q.admit("me", 2, &grants(2, 0)).await {
        AdmitReply::Ran(c) => assert_eq!((c.admitted, c.waiting, c.active), (2, 1, 2)),
        other => panic!("{other:?}"),
    }
    let token = q.token_of(&orderer).await.expect("admitted");
    assert!(q.token_of(&expirer).await.is_some());
    assert_eq!(q.consume(&orderer, &token).await, ConsumeReply::Accepted);
    assert_eq!(
        q.position(&orderer).await,
        Observed::Settled(UserState::InFlight)
    );
    assert_eq!(
        q.settle(&orderer, &token, Outcome::Success).await,
        SettleReply::Ordered
    );
    assert_eq!(
        q.position(&orderer).await,
        Observed::Settled(UserState::Ordered)
    );

    // The leaver stops polling, the expirer never uses the token; a new
    // waiter keeps polling through it all.
    q.enter(&waiter).await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert!(waiting_position(&q.position(&waiter).await).is_some());
    }
    q.set_lock("me").await;
    match q.admit("me", 0, &[]).await {
        AdmitReply::Ran(c) => assert_eq!((c.expired, c.abandoned), (1, 1), "{c:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        q.position(&expirer).await,
        Observed::Settled(UserState::Expired)
    );
    assert_eq!(
        q.position(&leaver).await,
        Observed::Settled(UserState::Abandoned)
    );
    assert_eq!(waiting_position(&q.position(&waiter).await), Some(1));
    assert_eq!(
        q.position(&stranger).await,
        Observed::Settled(UserState::NotInQueue)
    );
    q.assert_conserved().await;

    // Expired and abandoned visitors may re-enter at the back.
    assert_eq!(entered_position(&q.enter(&expirer).await), Some(2));
    assert_eq!(entered_position(&q.enter(&leaver).await), Some(3));
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_are_one_time_and_refusals_change_nothing() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "tokens", Settings::default()).await;
    q.set_lock("me").await;
    let (early, replayed) = (user(1), user(2));
    q.enter(&early).await;
    q.enter(&replayed).await;
    // The first grant activates in 5 s, the second at once.
    let mut g = grants(2, 0);
    g[0].jitter_ms = 5_000;
    q.admit("me", 2, &g).await;

    // Too early: refused with the wait; the token survives.
    let t_early = q.token_of(&early).await.unwrap();
    match q.consume(&early, &t_early).await {
        ConsumeReply::Early { wait_ms } => assert!((4_000..=5_000).contains(&wait_ms), "{wait_ms}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(q.token_of(&early).await, Some(t_early.clone()));

    // A wrong token is refused; the real one survives. Another user's
    // token is wrong too.
    let wrong = EntryToken::from_random([7; 16]);
    let t_replayed = q.token_of(&replayed).await.unwrap();
    assert_eq!(q.consume(&replayed, &wrong).await, ConsumeReply::Invalid);
    assert_eq!(q.consume(&replayed, &t_early).await, ConsumeReply::Invalid);
    assert_eq!(q.token_of(&replayed).await, Some(t_replayed.clone()));

    // 100 concurrent consumes of one token: exactly one passes.
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (q, u, t) = (q.clone(), replayed.clone(), t_replayed.clone());
            tokio::spawn(async move { q.consume(&u, &t).await })
        })
        .collect();
    let mut accepted = 0;
    for t in tasks {
        match t.await.unwrap() {
            ConsumeReply::Accepted => accepted += 1,
            ConsumeReply::Used => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(accepted, 1);

    // Origin failure: the same token comes back and works once more.
    assert!(matches!(
        q.settle(&replayed, &t_replayed, Outcome::ServerError).await,
        SettleReply::Restored { .. }
    ));
    assert_eq!(q.token_of(&replayed).await, Some(t_replayed.clone()));
    assert_eq!(
        q.consume(&replayed, &t_replayed).await,
        ConsumeReply::Accepted
    );
    // A duplicate settle after the real one changes nothing.
    assert_eq!(
        q.settle(&replayed, &t_replayed, Outcome::Success).await,
        SettleReply::Ordered
    );
    assert_eq!(
        q.settle(&replayed, &t_replayed, Outcome::ServerError).await,
        SettleReply::Stale
    );
    assert_eq!(q.consume(&replayed, &t_replayed).await, ConsumeReply::Used);
    // Success freed the slot: only the early user holds one.
    assert_eq!(q.zcard(&q.keys.active()).await, 1);
    assert_eq!(q.stat("restored").await, 1);
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_admitters_never_exceed_free_slots_and_stale_owners_admit_nobody() {
    let redis = RedisServer::shared();
    let settings = Settings {
        max_active: 40,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "race", settings).await;
    for i in 0..500 {
        q.enter(&user(i)).await;
    }
    // Split brain: three admitters all believe they own the lease.
    q.set_lock("a").await;
    let tasks: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            tokio::spawn(async move {
                let mut total = 0;
                for _ in 0..20 {
                    if let AdmitReply::Ran(c) = q.admit("a", 50, &grants(50, 0)).await {
                        assert!(c.active <= 40, "active {} over the cap", c.active);
                        total += c.admitted;
                    }
                }
                total
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 40, "exactly the free slots were filled");
    assert_eq!(q.zcard(&q.keys.active()).await, 40);

    // The lease moves to b mid-way: a is fenced off and changes nothing.
    let before_waiting = q.zcard(&q.keys.waiting()).await;
    let mut conn = q.conn.clone();
    let _: () = redis::cmd("ZREMRANGEBYRANK")
        .arg(q.keys.active())
        .arg(0)
        .arg(9)
        .query_async(&mut conn)
        .await
        .unwrap();
    q.set_lock("b").await;
    assert_eq!(q.admit("a", 50, &grants(50, 0)).await, AdmitReply::NotOwner);
    assert_eq!(q.zcard(&q.keys.waiting()).await, before_waiting);
    match q.admit("b", 50, &grants(50, 0)).await {
        AdmitReply::Ran(c) => assert_eq!((c.admitted, c.active), (10, 40)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn leavers_are_dropped_counted_and_never_admitted() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "leavers", fast_settings()).await;
    q.set_lock("me").await;
    // Even users poll, odd users leave after entering.
    for i in 0..20 {
        q.enter(&user(i)).await;
    }
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        for i in (0..20).step_by(2) {
            q.position(&user(i)).await;
        }
    }
    let AdmitReply::Ran(c) = q.admit("me", 100, &grants(100, 0)).await else {
        panic!("not owner");
    };
    assert_eq!((c.abandoned, c.admitted), (10, 10), "{c:?}");
    for i in 0..20 {
        let state = q.position(&user(i)).await;
        if i % 2 == 0 {
            assert!(
                matches!(state, Observed::Settled(UserState::Admitted { .. })),
                "{i}: {state:?}"
            );
        } else {
            assert_eq!(state, Observed::Settled(UserState::Abandoned), "{i}");
        }
    }
    assert_eq!(q.stat("abandoned").await, 10);
    q.assert_conserved().await;
}

#[tokio::test]
async fn a_rolling_scan_drops_leavers_mid_line_so_positions_count_live_visitors() {
    let redis = RedisServer::shared();
    let settings = Settings {
        leaver_scan_per_tick: 7,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "scan", settings).await;
    q.set_lock("me").await;
    q.run(&SetState {
        keys: &q.keys,
        state: QueueState::Paused,
        expect: None,
    })
    .await
    .unwrap();
    // Every third user leaves; the others keep polling.
    let live: Vec<usize> = (0..30).filter(|i| i % 3 != 0).collect();
    for i in 0..30 {
        q.enter(&user(i)).await;
    }
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        for &i in &live {
            q.position(&user(i)).await;
        }
    }
    // Paused: nobody is admitted, but five ticks of 7 cover the whole line.
    let mut abandoned = 0;
    for _ in 0..5 {
        if let AdmitReply::Ran(c) = q.admit("me", 10, &grants(10, 0)).await {
            assert!(!c.admitting && c.admitted == 0);
            abandoned += c.abandoned;
        }
    }
    assert_eq!(abandoned, 10);
    for (expected, &i) in live.iter().enumerate() {
        let pos = waiting_position(&q.position(&user(i)).await);
        assert_eq!(pos, Some(expected as u64 + 1), "user {i}");
    }
    assert_eq!(
        q.position(&user(0)).await,
        Observed::Settled(UserState::Abandoned)
    );
    q.assert_conserved().await;
}

#[tokio::test]
async fn lease_acquire_admit_release_compare_by_owner() {
    let redis = RedisServer::shared();
    let settings = Settings {
        lease_ttl_ms: 300,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "lease", settings).await;
    let acquire = |owner: &'static str| {
        let q = q.clone();
        async move {
            q.run(&LeaseAcquire {
                keys: &q.keys,
                owner,
                ttl_ms: 300,
            })
            .await
            .unwrap()
        }
    };
    // Each admit tick extends the lease of its owner (one round trip a
    // tick) and refuses anyone else without touching it.
    let renew = |owner: &'static str| {
        let q = q.clone();
        async move { !matches!(q.admit(owner, 0, &[]).await, AdmitReply::NotOwner) }
    };
    let release = |owner: &'static str| {
        let q = q.clone();
        async move {
            q.run(&LeaseRelease {
                keys: &q.keys,
                owner,
            })
            .await
            .unwrap()
        }
    };
    let pttl = || {
        let q = q.clone();
        async move {
            let mut conn = q.conn.clone();
            let ms: i64 = redis::cmd("PTTL")
                .arg(q.keys.lock())
                .query_async(&mut conn)
                .await
                .unwrap();
            ms
        }
    };
    // Someone waits (allowance 0 admits nobody): the queue is busy, so an
    // admit extends by lease_ttl_ms, not by the idle TTL (below).
    q.enter(&user(0)).await;
    let a = acquire("a").await;
    assert!(a.acquired && a.holder == "a");
    let b = acquire("b").await;
    assert!(!b.acquired && b.holder == "a");
    assert!(
        b.holder_ttl_ms.is_some_and(|t| t > 0 && t <= 300),
        "a standby learns when to ask again: {b:?}"
    );
    assert!(
        acquire("a").await.acquired,
        "re-acquire by the owner extends"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(pttl().await <= 100);
    assert!(renew("a").await);
    assert!(pttl().await > 200, "the owner's admit extended the lease");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!renew("b").await);
    assert!(pttl().await <= 100, "a non-owner's admit extends nothing");
    assert!(!release("b").await, "a non-owner's release does nothing");
    assert!(!acquire("b").await.acquired);
    assert!(release("a").await);
    assert!(!release("a").await);
    assert!(acquire("b").await.acquired);
    // An expired lease can be taken over, and the old owner cannot renew.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(!renew("b").await);
    assert!(acquire("a").await.acquired);

    // An idle queue (nobody waiting or pre-queued, no slot in use): the
    // owner's admit extends by the idle TTL, so it may wait for a wake-up.
    let _: () = redis::cmd("DEL")
        .arg(q.keys.waiting())
        .query_async(&mut q.conn.clone())
        .await
        .unwrap();
    assert!(renew("a").await);
    let idle = pttl().await;
    assert!(
        idle > 300 && idle <= q.settings.idle_lease_ttl_ms() as i64,
        "{idle} ms"
    );
}

/// `resume` switches only a paused queue, compared inside the script: an
/// operator who saw "paused" and resumes after a `close` landed leaves the
/// queue closed (before, a read and a separate write reopened it).
#[tokio::test]
async fn a_switch_from_an_expected_state_never_undoes_a_close() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "cas", Settings::default()).await;
    let set = |state, expect| {
        let q = q.clone();
        async move {
            q.run(&SetState {
                keys: &q.keys,
                state,
                expect,
            })
            .await
            .unwrap()
        }
    };
    let state = || {
        let q = q.clone();
        async move {
            let mut conn = q.conn.clone();
            let s: String = redis::cmd("HGET")
                .arg(q.keys.config())
                .arg("state")
                .query_async(&mut conn)
                .await
                .unwrap();
            s
        }
    };
    set(QueueState::Paused, None).await;
    // The operator reads "paused" and decides to resume ...
    assert_eq!(state().await, "paused");
    // ... a close lands in between ...
    assert_eq!(
        set(QueueState::Closed, None).await,
        StateSwitch::Switched(Some(QueueState::Paused))
    );
    // ... and the resume is refused: the queue stays closed.
    assert_eq!(
        set(QueueState::Open, Some(QueueState::Paused)).await,
        StateSwitch::Refused(Some(QueueState::Closed))
    );
    assert_eq!(state().await, "closed");
    // From the expected state it switches.
    set(QueueState::Paused, None).await;
    assert_eq!(
        set(QueueState::Open, Some(QueueState::Paused)).await,
        StateSwitch::Switched(Some(QueueState::Paused))
    );
    assert_eq!(state().await, "open");
}

/// Every script that needs published settings answers the same way when
/// they are missing, and writes nothing: no defaults hide in Lua.
#[tokio::test]
async fn missing_config_is_refused_alike_and_changes_nothing() {
    let redis = RedisServer::start();
    let q = TestQueue::open(&redis.url(), "nocfg", fast_settings()).await;
    q.set_lock("me").await;
    let ann = user(1);
    q.enter(&ann).await;
    q.admit("me", 1, &grants(1, 0)).await;
    let token = q.token_of(&ann).await.expect("admitted");
    assert_eq!(q.consume(&ann, &token).await, ConsumeReply::Accepted);
    let other = user(2);
    q.enter(&other).await;
    q.admit("me", 1, &grants(1, 0)).await;
    let other_token = q.token_of(&other).await.expect("admitted");

    let mut conn = q.conn.clone();
    let _: () = redis::cmd("DEL")
        .arg(q.keys.config())
        .query_async(&mut conn)
        .await
        .unwrap();
    let before = q.snapshot().await;
    assert_eq!(q.enter(&user(3)).await, EnterReply::Closed(None));
    assert_eq!(
        q.consume(&other, &other_token).await,
        ConsumeReply::Unconfigured
    );
    assert_eq!(
        q.settle(&ann, &token, Outcome::ServerError).await,
        SettleReply::Unconfigured
    );
    assert_eq!(
        q.settle(&ann, &token, Outcome::Success).await,
        SettleReply::Unconfigured
    );
    assert_eq!(q.snapshot().await, before, "nothing was written");
}

#[tokio::test]
async fn scripts_load_by_their_pinned_hashes_and_fall_back_to_eval() {
    let redis = RedisServer::start();
    let q = TestQueue::open(&redis.url(), "sha", Settings::default()).await;
    let mut conn = q.conn.clone();
    // Configure ran on a fresh server, so EVALSHA got NOSCRIPT and EVAL
    // cached it. Every script's SHA-1 equals what Redis computes.
    for script in queuegate_shared::script::all() {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source())
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(sha, script.sha1(), "{}", script.name());
    }
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        entered_position(&q.enter(&user(1)).await).is_some(),
        "EVAL after NOSCRIPT"
    );
}

/// A randomized run of thousands of operations with short TTLs, checked
/// against the counter identities and a per-user view at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn randomized_run_conserves_every_user() {
    let settings = Settings {
        max_active: 15,
        max_waiting: 120,
        ..fast_settings()
    };
    randomized_run("random", settings).await;
}

/// 4,000 random enters, polls, ticks, consumes and settles of 150 users on
/// queue `queue` (`QG_SEED=<n>` replays one), the counters checked along
/// the way, then every user's one state against the sets. Returns the
/// visitors the ticks passed over into claims.
pub(crate) async fn randomized_run(queue: &str, settings: Settings) -> u64 {
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("QG_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("randomized run seed {seed} (QG_SEED to replay)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), queue, settings).await;
    let mut claimed = 0;
    q.set_lock("me").await;
    let users = 150;
    let mut tokens: Vec<Option<EntryToken>> = vec![None; users];
    let mut in_flight: HashSet<usize> = HashSet::new();
    for step in 0..4_000 {
        let u = rng.random_range(0..users);
        let id = user(u);
        match rng.random_range(0..100) {
            0..=29 => {
                q.enter(&id).await;
            }
            30..=54 => {
                if let Observed::Settled(UserState::Admitted { token, .. }) = q.position(&id).await
                {
                    tokens[u] = EntryToken::parse(&token);
                }
            }
            55..=64 => {
                let n = rng.random_range(0..6);
                if let AdmitReply::Ran(c) = q
                    .admit("me", n, &grants(n as usize, rng.random_range(0..50)))
                    .await
                {
                    claimed += c.claimed;
                }
            }
            65..=79 => {
                if let Some(t) = tokens[u].clone() {
                    if q.consume(&id, &t).await == ConsumeReply::Accepted {
                        in_flight.insert(u);
                    }
                }
            }
            80..=89 => {
                if in_flight.remove(&u) {
                    let outcome = if rng.random_bool(0.7) {
                        Outcome::Success
                    } else {
                        Outcome::ServerError
                    };
                    let t = tokens[u]
                        .clone()
                        .expect("an in-flight user holds its token");
                    q.settle(&id, &t, outcome).await;
                }
            }
            _ => {
                // A wrong token never changes anything.
                let wrong = EntryToken::from_random(rng.random());
                assert_eq!(q.consume(&id, &wrong).await, ConsumeReply::Invalid);
            }
        }
        if step % 50 == 0 {
            // Let TTLs and abandonment happen along the way.
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..40))).await;
        }
        if step % 500 == 0 {
            q.assert_conserved().await;
        }
    }
    q.admit("me", 0, &[]).await;
    q.assert_conserved().await;

    // Per user: exactly one state, consistent with the sets.
    // Each user's state against the sets right after its own poll (one
    // script, so the two agree at that moment): a set read once before
    // the loop goes stale while it runs, as a claim older than the sleep
    // grace is ended by its holder's poll (user 98 of a CI run: in
    // `claims` when read, `abandoned` when polled ~0.3 s later).
    let in_set = |key: String, id: String| {
        let mut conn = q.conn.clone();
        async move {
            redis::cmd("ZSCORE")
                .arg(key)
                .arg(id)
                .query_async::<Option<f64>>(&mut conn)
                .await
                .expect("ZSCORE")
                .is_some()
        }
    };
    let mut by_state: BTreeMap<&'static str, usize> = BTreeMap::new();
    for u in 0..users {
        let id = user(u);
        let state = q.position(&id).await;
        let name = match &state {
            Observed::Waiting(_) => "waiting",
            Observed::PreQueue(_) => "pre_queue",
            Observed::Settled(s) => s.name(),
            Observed::SoldOut => "sold_out",
        };
        *by_state.entry(name).or_default() += 1;
        let placed = in_set(q.keys.waiting(), id.to_string()).await
            || in_set(q.keys.claims(), id.to_string()).await;
        assert_eq!(placed, name == "waiting", "user {u}: {state:?}");
        if name == "admitted" {
            assert!(
                in_set(q.keys.active(), id.to_string()).await,
                "admitted user {u} holds a slot"
            );
        }
    }
    eprintln!("final states: {by_state:?}");
    assert_eq!(by_state.values().sum::<usize>(), users);
    assert!(
        by_state.len() >= 4,
        "the run reached few states: {by_state:?}"
    );
    q.assert_conserved().await;
    claimed
}

#[tokio::test]
async fn published_settings_read_back_from_the_config_hash() {
    let redis = RedisServer::shared();
    let settings = Settings {
        admit_rate_per_second: 17.5,
        max_active: 7,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "cfg", settings.clone()).await;
    let mut conn = q.conn.clone();
    let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(q.keys.config())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(fields["state"], "open");
    assert_eq!(Settings::from_fields(&fields).unwrap(), settings);
    // Publishing again never reopens a queue the operator closed.
    q.run(&SetState {
        keys: &q.keys,
        state: QueueState::Closed,
        expect: None,
    })
    .await
    .unwrap();
    let state = q
        .run(&queuegate_shared::ops::Configure {
            keys: &q.keys,
            settings: &Settings::default(),
            initial_state: QueueState::Open,
        })
        .await
        .unwrap();
    assert_eq!(state, QueueState::Closed);
}

#[tokio::test]
async fn the_measured_rate_reaches_the_eta() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "eta", Settings::default()).await;
    for i in 0..100 {
        q.enter(&user(i)).await;
    }
    q.set_lock("me").await;
    let reply = q
        .run(&queuegate_shared::ops::Admit {
            keys: &q.keys,
            owner: "me",
            allowance: 0,
            settings: &q.settings,
            rate_estimate: Some(5.0),
            rate_in_force: 1e9,
            grants: &[],
            idle_lease: false,
        })
        .await
        .unwrap();
    assert!(matches!(reply, AdmitReply::Ran(_)));
    let Observed::Waiting(w) = q.position(&user(99)).await else {
        panic!("user 99 waits");
    };
    assert_eq!((w.position, w.measured_rate), (100, Some(5.0)));
    let state = Observed::Waiting(w).into_user_state(&Settings::default(), 0.0);
    // 100 ahead at 5/s, not at the configured 175/s.
    assert_eq!(
        serde_json::to_value(&state).unwrap()["etaSeconds"],
        serde_json::json!(20)
    );
}

/// The guard's state (address budgets, used solutions) lives in one hash
/// per queue; the admit tick sweeps what is no longer needed, so it does
/// not grow with the crowd.
#[tokio::test]
async fn the_admit_tick_sweeps_full_budgets_and_expired_solutions() {
    use queuegate_edge::altcha::Verified;
    use queuegate_shared::guard::{ClientAddress, EntryGuard};
    use queuegate_shared::ops::{Enter, Refusal};

    let redis = RedisServer::shared();
    let settings = Settings {
        entry_budget_per_minute: 600, // one place back every 100 ms
        entry_budget_burst: 2,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "upkeep", settings).await;
    q.set_lock("me").await;
    let now_ms = queuegate_testkit::now_ms();
    let home = ClientAddress::parse("203.0.113.9").unwrap();
    let enter = |i: usize, solution: Option<Verified>| {
        let (q, home) = (q.clone(), home.clone());
        async move {
            q.run(&Enter {
                keys: &q.keys,
                user: &user(i),
                guard: EntryGuard {
                    address: Some(&home),
                    solution: solution.as_ref(),
                    missing: None,
                },
                token: None,
            })
            .await
            .unwrap()
        }
    };
    let solved = |tag: char, ms: u64| Verified {
        challenge: tag.to_string().repeat(64),
        expires_at_ms: now_ms + ms,
        level: 0,
    };
    assert!(matches!(
        enter(1, Some(solved('a', 300))).await,
        EnterReply::Entered(_)
    ));
    assert!(matches!(
        enter(2, Some(solved('b', 60_000))).await,
        EnterReply::Entered(_)
    ));
    assert!(matches!(
        enter(3, Some(solved('c', 60_000))).await,
        EnterReply::Refused(Refusal::TooManyEntries { .. })
    ));
    let guard = |q: TestQueue| async move {
        let mut conn = q.conn.clone();
        let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
            .arg(q.keys.guard())
            .query_async(&mut conn)
            .await
            .unwrap();
        fields.into_keys().collect::<Vec<_>>()
    };
    let (a, b) = (
        format!("pow:{}", "a".repeat(64)),
        format!("pow:{}", "b".repeat(64)),
    );
    assert_eq!(
        guard(q.clone()).await,
        ["203.0.113.9".to_string(), a, b.clone()],
        "one budget, two used solutions; the refused enter spent none"
    );

    // After the refill and past the first solution's expiry, one tick
    // forgets both; the unexpired solution stays used.
    tokio::time::sleep(Duration::from_millis(400)).await;
    q.admit("me", 0, &[]).await;
    assert_eq!(guard(q.clone()).await, [b]);
    assert!(matches!(
        enter(4, Some(solved('b', 60_000))).await,
        EnterReply::Refused(Refusal::SolutionReused)
    ));
}

/// A solution carries the difficulty level it was issued at; `enter`
/// computes the level in force from the line it counts (the same
/// thresholds as `challenge_level`) and refuses a lower one as stale,
/// writing nothing but the refusal counter.
#[tokio::test]
async fn a_solution_below_the_level_in_force_is_stale_and_changes_nothing() {
    use queuegate_edge::altcha::Verified;
    use queuegate_shared::fields::stats as sf;
    use queuegate_shared::guard::{challenge_level, EntryGuard, MAX_LEVEL};
    use queuegate_shared::ops::{Enter, Refusal};

    let redis = RedisServer::start();
    let max_waiting = 8;
    let settings = Settings {
        max_waiting,
        challenge_crowd: max_waiting,
        entry_budget_per_minute: 0,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "levels", settings).await;
    let now_ms = queuegate_testkit::now_ms();
    let mut serial = 0u64;
    let mut enter = |i: usize, level: u8| {
        serial += 1;
        let q = q.clone();
        let solution = Verified {
            challenge: format!("{serial:064x}"),
            expires_at_ms: now_ms + 60_000,
            level,
        };
        async move {
            q.run(&Enter {
                keys: &q.keys,
                user: &user(i),
                guard: EntryGuard {
                    solution: Some(&solution),
                    ..EntryGuard::default()
                },
                token: None,
            })
            .await
            .unwrap()
        }
    };

    // At every size of the line, each level below the one in force is
    // refused and the level in force takes the place (the line grows by one).
    let mut stale = 0;
    for size in 0..max_waiting {
        let in_force = challenge_level(size, max_waiting);
        for level in 0..=MAX_LEVEL {
            let before = q.snapshot().await;
            let reply = enter(size as usize, level).await;
            if level < in_force {
                assert_eq!(
                    reply,
                    EnterReply::Refused(Refusal::SolutionStale),
                    "size {size}, level {level}"
                );
                stale += 1;
                let after = q.snapshot().await;
                let moved: Vec<&String> = after
                    .keys()
                    .filter(|k| before.get(*k) != after.get(*k))
                    .collect();
                assert_eq!(moved, [&q.keys.stats()], "only the counter moved");
                assert_eq!(q.stat(sf::REFUSED_STALE).await, stale);
            } else {
                assert_eq!(
                    entered_position(&reply),
                    Some(size + 1),
                    "size {size}, level {level}: {reply:?}"
                );
                break;
            }
        }
    }
    // Half full from 4, three quarters from 6: sizes 4 and 5 refuse level
    // 0, sizes 6 and 7 levels 0 and 1.
    assert_eq!(stale, 6);
    assert_eq!(q.zcard(&q.keys.waiting()).await, max_waiting);
    assert_eq!(q.stat(sf::ENTERED).await, max_waiting as i64);
}

/// Settings whose near zone is 2 s (`abandon_after_ms + 2 × poll_max_ms`
/// with fast_settings): at 5 admissions/s, the first 10 visitors.
fn zoned_settings() -> Settings {
    Settings {
        exact_zone_ms: 0,
        ..fast_settings()
    }
}

/// The ticket (score) of `u` in the line, read without touching it (a
/// position call would mark the user seen).
async fn ticket_in_line(q: &TestQueue, u: &UserId) -> Option<u64> {
    let mut conn = q.conn.clone();
    redis::cmd("ZSCORE")
        .arg(q.keys.waiting())
        .arg(u.as_str())
        .query_async(&mut conn)
        .await
        .expect("zscore")
}

#[tokio::test]
async fn only_the_near_zone_must_keep_polling_far_back_silence_keeps_a_place() {
    let redis = RedisServer::shared();
    let settings = zoned_settings();
    assert_eq!(settings.near_zone_visitors(5.0), 10);
    let q = TestQueue::open(&redis.url(), "zone", settings).await;
    q.set_lock("me").await;
    q.run(&SetState {
        keys: &q.keys,
        state: QueueState::Paused,
        expect: None,
    })
    .await
    .unwrap();
    for i in 0..30 {
        q.enter(&user(i)).await;
    }
    // The first tick draws the zone round the first 10.
    let AdmitReply::Ran(c) = q.admit_at("me", 10, &grants(10, 0), 5.0).await else {
        panic!("not owner");
    };
    assert_eq!(c.abandoned, 0);
    let front: u64 = q.config_field("zone_front").await.parse().unwrap();
    assert_eq!(Some(front), ticket_in_line(&q, &user(9)).await);
    // Users 0–4 keep polling; 5–9 (near) and 10–29 (far) fall silent for
    // 2 s, well past abandon_after (1 s, at most 1.25 s with the buckets).
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        for i in 0..5 {
            q.position(&user(i)).await;
        }
    }
    // (The lease lapsed while nobody ticked.)
    q.set_lock("me").await;
    let mut abandoned = 0;
    for _ in 0..3 {
        let AdmitReply::Ran(c) = q.admit_at("me", 10, &grants(10, 0), 5.0).await else {
            panic!("not owner");
        };
        abandoned += c.abandoned;
    }
    // The silent near ones are gone; the silent far ones kept their places
    // (the old rolling scan walked the whole line and dropped all 25).
    assert_eq!(abandoned, 5);
    for i in 5..10 {
        assert_eq!(
            q.position(&user(i)).await,
            Observed::Settled(UserState::Abandoned),
            "{i}"
        );
    }
    for i in 10..30 {
        assert!(
            ticket_in_line(&q, &user(i)).await.is_some(),
            "{i} lost its place"
        );
    }
    // The zone moved on over 10–14 and gave them a grace to poll in; it
    // never moves back.
    let front: u64 = q.config_field("zone_front").await.parse().unwrap();
    assert_eq!(Some(front), ticket_in_line(&q, &user(14)).await);
    // The snapshot the edge answers from.
    assert_eq!(q.config_field("waiting").await, "25");
    assert_eq!(q.config_field("zone_count").await, "10");
    let tail: u64 = q.config_field("tail").await.parse().unwrap();
    assert_eq!(Some(tail), ticket_in_line(&q, &user(29)).await);
    q.assert_conserved().await;
}

#[tokio::test]
async fn a_leaver_from_far_back_is_dropped_once_near_and_never_admitted() {
    let redis = RedisServer::shared();
    let q = TestQueue::open(&redis.url(), "zone-leaver", zoned_settings()).await;
    q.set_lock("me").await;
    for i in 0..30 {
        q.enter(&user(i)).await;
    }
    // User 15 never polls again; everyone else polls every 250 ms; one
    // admission per tick (4/s), so user 15 comes near after ~5 ticks and
    // would reach the head after ~15: far longer than its grace.
    let mut admitted = Vec::new();
    let mut dropped = 0;
    for _ in 0..24 {
        let AdmitReply::Ran(c) = q.admit_at("me", 1, &grants(1, 0), 5.0).await else {
            panic!("not owner");
        };
        dropped += c.abandoned;
        for i in (0..30).filter(|&i| i != 15) {
            match q.position(&user(i)).await {
                Observed::Settled(UserState::Admitted { .. }) => {
                    if !admitted.contains(&i) {
                        admitted.push(i);
                    }
                }
                Observed::Waiting(_) => {}
                // Its token lapsed unused (tokens live 1 s here), and then
                // its status (5 s).
                Observed::Settled(_) if admitted.contains(&i) => {}
                other => panic!("{i}: {other:?}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(dropped, 1, "admitted {admitted:?}");
    assert_eq!(
        q.position(&user(15)).await,
        Observed::Settled(UserState::Abandoned)
    );
    // Everyone ahead of it, and the ones behind it who came up in its
    // stead, were admitted in order.
    assert!(admitted.len() >= 20, "{admitted:?}");
    let expected: Vec<usize> = (0..30).filter(|&i| i != 15).take(admitted.len()).collect();
    assert_eq!(admitted, expected);
    q.assert_conserved().await;
}
