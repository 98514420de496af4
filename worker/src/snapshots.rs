//! Each isolate's snapshots of its queues (docs/uncapped-line.md): read
//! with one `HMGET` at most once per [`REFRESH_MS`] (5 s) per queue, so
//! the polls an isolate answers at the edge cost Redis one call in five
//! seconds, however many there are. A refresh under way counts as fresh too: requests that
//! arrive meanwhile use the last snapshot instead of reading again.

use std::sync::{Arc, Mutex};

use queuegate_shared::snapshot::{Snapshot, REFRESH_MS};

/// The isolate's snapshots, by queue id: a short list (a worker serves a
/// few queues; a `HashMap` and its hasher would add kilobytes to the wasm).
#[derive(Debug, Default)]
pub struct SnapshotCache(Mutex<Vec<Entry>>);

#[derive(Debug)]
struct Entry {
    /// The queue id.
    queue: String,
    /// When the last refresh started (epoch ms).
    started: u64,
    /// What the last finished refresh read (None: nothing usable), shared
    /// with the requests it answers: a poll takes a reference, not a copy
    /// of its marks.
    snapshot: Option<Arc<Snapshot>>,
}

/// Most queues whose snapshots one isolate keeps. With a `QUEUES` pattern
/// (`drop-*`) a client may name queues nobody runs: their entries hold no
/// snapshot and go first when the list is full, then the least recently
/// refreshed, so made-up names cannot push the real queues' snapshots out
/// (and send their polls to Redis).
const MAX_QUEUES: usize = 64;

impl SnapshotCache {
    /// The snapshot to answer with at `now_ms`, and whether the caller
    /// must refresh it first (then the start is recorded and the caller
    /// reports what it read with [`Self::record`]).
    pub fn get_or_start(&self, queue: &str, now_ms: u64) -> (Option<Arc<Snapshot>>, bool) {
        // Held for a few loads, never across an await; wasm has one thread.
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = list.iter_mut().find(|e| e.queue == queue) {
            if now_ms.saturating_sub(e.started) < REFRESH_MS {
                return (e.snapshot.clone(), false);
            }
            e.started = now_ms;
            return (e.snapshot.clone(), true);
        }
        if list.len() >= MAX_QUEUES {
            list.retain(|e| e.snapshot.is_some());
        }
        if list.len() >= MAX_QUEUES {
            if let Some(oldest) = (0..list.len()).min_by_key(|&i| list[i].started) {
                list.swap_remove(oldest);
            }
        }
        list.push(Entry {
            queue: queue.to_string(),
            started: now_ms,
            snapshot: None,
        });
        (None, true)
    }

    /// The last ticket the last snapshot of `queue` sends to Redis for
    /// good ([`Snapshot::exact_front`]), if one is held.
    pub fn exact_front(&self, queue: &str) -> Option<u64> {
        let list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let s = list.iter().find(|e| e.queue == queue)?.snapshot.as_ref()?;
        Some(s.exact_front())
    }

    /// The tickets `(base, end]` of the last sealed draw in the snapshot
    /// held for `queue` (None: none, or no snapshot).
    pub fn last_draw(&self, queue: &str) -> Option<(u64, u64)> {
        let list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let s = list.iter().find(|e| e.queue == queue)?.snapshot.as_ref()?;
        let d = s.draw.as_ref()?;
        Some((d.base, d.base + d.rounds.iter().sum::<u64>()))
    }

    /// The operator's notice in the snapshot held for `queue`, without a
    /// refresh, for a visitor whose page is in the language `lang` gives
    /// (asked only when the notice has texts per language).
    pub fn notice(&self, queue: &str, lang: impl FnOnce() -> &'static str) -> Option<String> {
        let list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let snapshot = list.iter().find(|e| e.queue == queue)?.snapshot.as_ref()?;
        let default = snapshot.notice.as_deref()?;
        if snapshot.notice_texts.is_empty() {
            return Some(default.to_string());
        }
        Some(
            queuegate_shared::notice::for_language(default, &snapshot.notice_texts, lang())
                .to_string(),
        )
    }

    /// The queue's kept stock as the last snapshot read it (None: none
    /// kept, or no snapshot).
    pub fn stock(&self, queue: &str) -> Option<queuegate_shared::chance::StockView> {
        let list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        list.iter()
            .find(|e| e.queue == queue)?
            .snapshot
            .as_ref()?
            .stock
    }

    /// Keeps what a refresh read (None: nothing usable, e.g. before the
    /// first tick of a scheduler that writes snapshots).
    pub fn record(&self, queue: &str, snapshot: Option<Arc<Snapshot>>) {
        let mut list = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = list.iter_mut().find(|e| e.queue == queue) {
            e.snapshot = snapshot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::policy::{PollPolicy, PreQueuePolicy};
    use queuegate_shared::QueueState;

    fn snap(at: u64) -> Arc<Snapshot> {
        Arc::new(plain(at))
    }

    fn plain(at: u64) -> Snapshot {
        Snapshot {
            zone_front: 10,
            zone_count: 10,
            tail: 100,
            waiting: 100,
            snap_at: at,
            snap_ttl: Some(2_000),
            live_writer: true,
            state: QueueState::Open,
            draw_left: 0,
            measured_rate: None,
            policy: PollPolicy {
                admit_rate_per_second: 5.0,
                poll_min_ms: 1_000,
                poll_max_ms: 30_000,
            },
            marks: Vec::new(),
            opens_at: None,
            pre_policy: PreQueuePolicy {
                poll_min_ms: 1_000,
                poll_max_ms: 30_000,
                opening_spread_ms: 30_000,
                abandon_after_ms: 90_000,
            },
            head_front: 0,
            head_count: 0,
            sealed: 0,
            draw: None,
            notice: None,
            notice_texts: Vec::new(),
            stock: None,
        }
    }

    #[test]
    fn the_notice_is_read_from_the_snapshot_held() {
        let cache = SnapshotCache::default();
        let unasked = || -> &'static str { panic!("no texts per language: no language needed") };
        assert_eq!(cache.notice("main", unasked), None);
        cache.get_or_start("main", 1_000);
        cache.record(
            "main",
            Some(Arc::new(Snapshot {
                notice: Some("S and M sold out".into()),
                ..plain(1_000)
            })),
        );
        assert_eq!(
            cache.notice("main", unasked).as_deref(),
            Some("S and M sold out")
        );
        assert_eq!(cache.notice("other", unasked), None);
        // With texts per language: the visitor's, else the default.
        cache.record(
            "main",
            Some(Arc::new(Snapshot {
                notice: Some("S and M sold out".into()),
                notice_texts: vec![("de".into(), "S und M ausverkauft".into())],
                ..plain(1_000)
            })),
        );
        assert_eq!(
            cache.notice("main", || "de").as_deref(),
            Some("S und M ausverkauft")
        );
        assert_eq!(
            cache.notice("main", || "fr").as_deref(),
            Some("S and M sold out")
        );
    }

    #[test]
    fn one_refresh_per_interval_per_queue_and_none_while_one_runs() {
        let r = REFRESH_MS;
        let cache = SnapshotCache::default();
        assert_eq!(cache.get_or_start("main", 10_000), (None, true));
        // Under way: the others answer without it (exact path), no read.
        assert_eq!(cache.get_or_start("main", 10_100), (None, false));
        cache.record("main", Some(snap(10_050)));
        assert_eq!(
            cache.get_or_start("main", 10_000 + r - 1),
            (Some(snap(10_050)), false)
        );
        // An interval on: one request refreshes, serving the old meanwhile.
        assert_eq!(
            cache.get_or_start("main", 10_000 + r),
            (Some(snap(10_050)), true)
        );
        assert_eq!(
            cache.get_or_start("main", 10_001 + r),
            (Some(snap(10_050)), false)
        );
        // Another queue has its own.
        assert_eq!(cache.get_or_start("other", 10_001 + r), (None, true));
        assert_eq!(cache.exact_front("main"), Some(10));
        assert_eq!(cache.exact_front("other"), None);
    }

    #[test]
    fn made_up_queue_names_never_push_out_a_real_queues_snapshot() {
        let cache = SnapshotCache::default();
        cache.get_or_start("main", 1_000);
        cache.record("main", Some(snap(1_000)));
        // Many names a pattern allows but nobody runs: nothing to read.
        for i in 0..10 * MAX_QUEUES {
            let name = format!("drop-{i}");
            cache.get_or_start(&name, 1_001);
            cache.record(&name, None);
        }
        assert_eq!(
            cache.get_or_start("main", 1_002),
            (Some(snap(1_000)), false),
            "kept, and still fresh: no extra read"
        );
        assert!(cache.0.lock().unwrap().len() <= MAX_QUEUES);
        // Real queues beyond the bound: the least recently refreshed goes.
        for i in 0..MAX_QUEUES as u64 {
            let name = format!("real-{i}");
            cache.get_or_start(&name, 2_000 + i);
            cache.record(&name, Some(snap(2_000 + i)));
        }
        assert_eq!(cache.exact_front("main"), None, "main, the oldest, went");
        assert_eq!(cache.exact_front("real-63"), Some(10));
        assert!(cache.0.lock().unwrap().len() <= MAX_QUEUES);
    }
}
