//! Drop-day helpers for the system tests: the schedule, a pre-queue filled
//! in one pipeline, the draw run as the lease holder would run it, and the
//! rank correlation the fairness checks use.

use std::time::{Duration, Instant};

use queuegate_scheduler::draw::Placement;
use queuegate_shared::guard::EntryGuard;
use queuegate_shared::ops::{
    Change, DrawOpen, DrawSeed, DrawState, Drawing, Enter, EnterReply, Observed, Placed, Schedule,
    Scheduled,
};
use queuegate_shared::{Operation, UserId};
use queuegate_testkit::now_ms;

use crate::TestQueue;

/// Sets (or keeps, or clears) the opening and the closing.
pub async fn schedule(q: &TestQueue, opens_at: Change, closes_at: Change) -> Scheduled {
    q.run(&Schedule {
        keys: &q.keys,
        opens_at,
        closes_at,
    })
    .await
    .expect("schedule")
}

/// An opening `ms` from now (epoch ms).
pub fn in_ms(ms: u64) -> u64 {
    now_ms() + ms
}

/// Moves the opening into the past: the next entry or draw_open seals.
pub async fn open_now(q: &TestQueue) {
    schedule(q, Change::Set(now_ms() - 1), Change::Keep).await;
}

/// Enters `users` in this order, pipelined 1,000 at a time (one round trip
/// per chunk), as tools/src/edge_bench does. The replies are not read:
/// check the keys afterwards.
pub async fn enter_pipelined(q: &TestQueue, users: &[UserId]) {
    let mut conn = q.conn.clone();
    let enter = |u| Enter {
        keys: &q.keys,
        user: u,
        guard: EntryGuard::default(),
        token: None,
    };
    let Some(first) = users.first() else { return };
    // Loads the script, so the pipelined EVALSHAs find it.
    q.run(&enter(first)).await.expect("enter");
    for chunk in users[1..].chunks(1_000) {
        let mut pipe = redis::pipe();
        for u in chunk {
            queuegate_scheduler::engine::pipe_evalsha(&mut pipe, &enter(u).invocation());
            pipe.ignore();
        }
        let () = pipe.query_async(&mut conn).await.expect("pipelined enters");
    }
}

/// The draw as a lease holder runs it, one batch at a time: the
/// scheduler's own [`Placement`], driven by hand.
#[derive(Debug)]
pub struct DrawRun {
    /// The owner id the test holds the lease as.
    pub owner: String,
    placement: Placement,
}

impl DrawRun {
    /// Takes the lease as `owner` and calls `draw_open` (which seals a
    /// pre-queue whose opening passed). None when no draw runs.
    pub async fn open(q: &TestQueue, owner: &str, seed: [u8; 32]) -> Option<DrawRun> {
        q.set_lock(owner).await;
        let state = q
            .run(&DrawOpen {
                keys: &q.keys,
                owner,
                seed: Some(&DrawSeed::from_random(seed)),
                commit: None,
            })
            .await
            .expect("draw_open");
        let drawing = match state {
            DrawState::Drawing(d) => d,
            DrawState::Idle { .. } => return None,
            DrawState::NotOwner => panic!("draw_open: we hold the lease"),
            DrawState::Sealed(s) => panic!("draw_open gave a seed, yet {s:?} waits for one"),
        };
        Some(DrawRun {
            owner: owner.to_string(),
            placement: Placement::new(drawing),
        })
    }

    /// The draw as `draw_open` reported it (`done` follows the batches).
    pub fn drawing(&self) -> &Drawing {
        self.placement.drawing()
    }

    /// Visitors placed so far by this run.
    pub fn placed(&self) -> u64 {
        self.placement.placed()
    }

    /// Pre-queued leavers dropped so far by this run.
    pub fn dropped(&self) -> u64 {
        self.placement.dropped()
    }

    /// Places the next `batch`; returns the visitors left to place.
    pub async fn step(&mut self, q: &TestQueue, batch: u64) -> u64 {
        let mut conn = q.conn.clone();
        let reply = self
            .placement
            .step(&mut conn, &q.keys, &self.owner, batch)
            .await
            .expect("draw_place");
        match reply {
            Placed::Batch { left, .. } => left,
            other => panic!("draw_place as the holder: {other:?}"),
        }
    }

    /// Places everything left.
    pub async fn finish(&mut self, q: &TestQueue, batch: u64) {
        while self.step(q, batch).await > 0 {}
    }
}

/// A config hash field, if set.
pub async fn config_field(q: &TestQueue, field: &str) -> Option<String> {
    let mut conn = q.conn.clone();
    redis::cmd("HGET")
        .arg(q.keys.config())
        .arg(field)
        .query_async(&mut conn)
        .await
        .expect("HGET config")
}

/// A ZSET's score of `u`.
pub async fn score(q: &TestQueue, key: &str, u: &UserId) -> Option<u64> {
    let mut conn = q.conn.clone();
    let s: Option<f64> = redis::cmd("ZSCORE")
        .arg(key)
        .arg(u.as_str())
        .query_async(&mut conn)
        .await
        .expect("ZSCORE");
    s.map(|s| s as u64)
}

/// The scores of `users` in `key`, in one round trip.
pub async fn scores(q: &TestQueue, key: &str, users: &[UserId]) -> Vec<Option<u64>> {
    let mut conn = q.conn.clone();
    let mut out = Vec::with_capacity(users.len());
    for chunk in users.chunks(5_000) {
        let s: Vec<Option<f64>> = redis::cmd("ZMSCORE")
            .arg(key)
            .arg(chunk.iter().map(UserId::as_str).collect::<Vec<_>>())
            .query_async(&mut conn)
            .await
            .expect("ZMSCORE");
        out.extend(s.into_iter().map(|s| s.map(|s| s as u64)));
    }
    out
}

/// Whether a key exists.
pub async fn exists(q: &TestQueue, key: &str) -> bool {
    let mut conn = q.conn.clone();
    redis::cmd("EXISTS")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("EXISTS")
}

/// Spearman's rank correlation of two rankings of the same items without
/// ties: `a[i]` and `b[i]` are item i's ranks (any distinct numbers; they
/// are re-ranked here).
pub fn spearman(a: &[u64], b: &[u64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let n = a.len() as f64;
    let rank = |v: &[u64]| {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_unstable_by_key(|&i| v[i]);
        let mut r = vec![0f64; v.len()];
        for (k, &i) in idx.iter().enumerate() {
            r[i] = k as f64;
        }
        r
    };
    let (ra, rb) = (rank(a), rank(b));
    let d2: f64 = ra.iter().zip(&rb).map(|(x, y)| (x - y).powi(2)).sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

/// The position of a waiting user.
pub fn position(o: &Observed) -> Option<u64> {
    match o {
        Observed::Waiting(w) => Some(w.position),
        _ => None,
    }
}

/// The position an enter gave, if it took a place in line.
pub fn entered_position(r: &EnterReply) -> Option<u64> {
    match r {
        EnterReply::Entered(o) => position(o),
        _ => None,
    }
}

/// Polls `check` every 20 ms until it holds or `within` passes.
pub async fn eventually<F: std::future::Future<Output = bool>>(
    within: Duration,
    mut check: impl FnMut() -> F,
) -> bool {
    let until = Instant::now() + within;
    while Instant::now() < until {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check().await
}

#[cfg(test)]
mod tests {
    use super::spearman;

    #[test]
    fn spearman_of_equal_reversed_and_shuffled_ranks() {
        let up: Vec<u64> = (0..100).collect();
        let down: Vec<u64> = (0..100).rev().collect();
        assert!((spearman(&up, &up) - 1.0).abs() < 1e-12);
        assert!((spearman(&up, &down) + 1.0).abs() < 1e-12);
        // Re-ranked: only the order counts.
        let spaced: Vec<u64> = up.iter().map(|x| x * 7 + 3).collect();
        assert!((spearman(&up, &spaced) - 1.0).abs() < 1e-12);
    }
}
