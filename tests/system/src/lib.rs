//! Shared helpers for the system tests: a queue driven through the shared
//! crate's operations over a real redis-server (redis-rs), exactly as the
//! scheduler runs them; the edge stack and a test origin. The tests
//! themselves live in `tests/`.

pub mod drop_day;
pub mod edge;
pub mod openapi;
pub mod origin;

use queuegate_scheduler::engine::{self, EngineError};
use queuegate_shared::ops::{
    Admit, AdmitReply, Configure, Consume, ConsumeReply, Enter, EnterReply, Observed, Outcome,
    Position, Settle, SettleReply,
};
use queuegate_shared::state::UserState;
use queuegate_shared::token::{EntryToken, Grant};
use queuegate_shared::{Operation, Prefix, QueueId, QueueKeys, QueueState, Settings, UserId};
use queuegate_testkit::since_epoch;
use redis::aio::MultiplexedConnection;

/// One queue on a real Redis, with its settings published.
#[derive(Clone)]
pub struct TestQueue {
    /// The queue's keys.
    pub keys: QueueKeys,
    /// The settings the operations use (and that were published).
    pub settings: Settings,
    /// A multiplexed connection: clone it per task.
    pub conn: MultiplexedConnection,
}

impl std::fmt::Debug for TestQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestQueue")
            .field("keys", &self.keys)
            .finish()
    }
}

/// A user id from a number.
pub fn user(n: usize) -> UserId {
    UserId::new(&format!("user-{n}")).expect("valid user id")
}

/// `n` distinct grants with the given jitter, from a counter and the clock
/// (no CSPRNG needed in tests; the scheduler uses one).
pub fn grants(n: usize, jitter_ms: u64) -> Vec<Grant> {
    (0..n)
        .map(|i| {
            let mut bytes = [0u8; 16];
            // Nanoseconds, so grants minted in quick succession still differ.
            let tag = (i as u64) ^ 0x5eed_0000_0000_0000 ^ since_epoch().as_nanos() as u64;
            bytes[..8].copy_from_slice(&tag.to_le_bytes());
            bytes[8..].copy_from_slice(&(i as u64).to_be_bytes());
            Grant {
                token: EntryToken::from_random(bytes),
                jitter_ms,
            }
        })
        .collect()
}

impl TestQueue {
    /// The tests' own connection to Redis. What is under test keeps its
    /// own timeouts; this client, which plays visitors and checks the
    /// keys, waits out a busy machine instead of redis-rs' default 500 ms
    /// (a scheduler test's stream of entries failed on it once, beside the
    /// page tests).
    pub async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
        let config = redis::AsyncConnectionConfig::new()
            .set_response_timeout(Some(std::time::Duration::from_secs(30)));
        redis::Client::open(url)
            .expect("redis url")
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .expect("connect to redis")
    }

    /// Connects, publishes `settings` for queue `queue` and opens it.
    pub async fn open(url: &str, queue: &str, settings: Settings) -> TestQueue {
        settings.validate().expect("test settings are valid");
        let conn = TestQueue::connect(url).await;
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new(queue).expect("queue id"));
        let q = TestQueue {
            keys,
            settings,
            conn,
        };
        let state = q
            .run(&Configure {
                keys: &q.keys,
                settings: &q.settings,
                initial_state: QueueState::Open,
            })
            .await
            .expect("configure");
        assert_eq!(state, QueueState::Open);
        q
    }

    /// Runs any operation.
    pub async fn run<O: Operation>(&self, op: &O) -> Result<O::Reply, EngineError> {
        let mut conn = self.conn.clone();
        engine::run(&mut conn, op).await
    }

    /// `enter` for user `u`.
    pub async fn enter(&self, u: &UserId) -> EnterReply {
        self.run(&Enter {
            keys: &self.keys,
            user: u,
            guard: queuegate_shared::guard::EntryGuard::default(),
            token: None,
        })
        .await
        .expect("enter")
    }

    /// `position` for user `u`.
    pub async fn position(&self, u: &UserId) -> Observed {
        self.run(&Position {
            keys: &self.keys,
            user: u,
        })
        .await
        .expect("position")
    }

    /// One admit tick as `owner` with an allowance and grants.
    pub async fn admit(&self, owner: &str, allowance: u64, grants: &[Grant]) -> AdmitReply {
        // The shared rate bucket never binds a test's hand-made tick
        // (tests/system/tests/drop_day/pre_queue.rs tests it), and the whole line is
        // near.
        self.admit_at(owner, allowance, grants, 1e9).await
    }

    /// A field of the config hash, as text ("" when absent).
    pub async fn config_field(&self, field: &str) -> String {
        let mut conn = self.conn.clone();
        let v: Option<String> = redis::cmd("HGET")
            .arg(self.keys.config())
            .arg(field)
            .query_async(&mut conn)
            .await
            .expect("hget");
        v.unwrap_or_default()
    }

    /// [`Self::admit`] at `rate` admissions per second in force: the rate
    /// sizes the near zone (`near_zone_visitors`) and the shared rate
    /// bucket, which `admit` keeps out of the way.
    pub async fn admit_at(
        &self,
        owner: &str,
        allowance: u64,
        grants: &[Grant],
        rate: f64,
    ) -> AdmitReply {
        self.run(&Admit {
            keys: &self.keys,
            owner,
            allowance,
            settings: &self.settings,
            rate_estimate: None,
            rate_in_force: rate,
            grants,
            // As the scheduler's holder does: an idle queue's lease is
            // extended by the idle TTL.
            idle_lease: true,
        })
        .await
        .expect("admit")
    }

    /// Every key and its DUMP: equal snapshots mean Redis did not change.
    /// The origin's sample marks are left out: a settled order leaves one
    /// that lives a second and goes by itself (a snapshot taken just after
    /// an order would otherwise differ from the next one on a slow
    /// machine), and nothing else writes them.
    pub async fn snapshot(&self) -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut conn = self.conn.clone();
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut conn)
            .await
            .expect("KEYS");
        let mut out = std::collections::BTreeMap::new();
        let sample_mark = format!(":{}", queuegate_shared::keys::name::SAMPLED);
        for k in keys {
            if k.contains(&sample_mark) {
                continue;
            }
            let dump: Vec<u8> = redis::cmd("DUMP")
                .arg(&k)
                .query_async(&mut conn)
                .await
                .expect("DUMP");
            out.insert(k, dump);
        }
        out
    }

    /// Sets the lease owner directly (tests only; the scheduler acquires).
    pub async fn set_lock(&self, owner: &str) {
        let mut conn = self.conn.clone();
        let _: () = redis::cmd("SET")
            .arg(self.keys.lock())
            .arg(owner)
            .query_async(&mut conn)
            .await
            .expect("SET lock");
    }

    /// `consume` of `token` by `u`.
    pub async fn consume(&self, u: &UserId, token: &EntryToken) -> ConsumeReply {
        self.run(&Consume {
            keys: &self.keys,
            user: u,
            token,
        })
        .await
        .expect("consume")
    }

    /// `settle` of `token` by `u`.
    pub async fn settle(&self, u: &UserId, token: &EntryToken, outcome: Outcome) -> SettleReply {
        self.run(&Settle {
            keys: &self.keys,
            user: u,
            token,
            outcome,
            latency_ms: 5,
            units: 1,
        })
        .await
        .expect("settle")
    }

    /// A counter from the stats hash (0 when absent).
    pub async fn stat(&self, field: &str) -> i64 {
        let mut conn = self.conn.clone();
        let v: Option<i64> = redis::cmd("HGET")
            .arg(self.keys.stats())
            .arg(field)
            .query_async(&mut conn)
            .await
            .expect("HGET stats");
        v.unwrap_or(0)
    }

    /// ZCARD of a key.
    pub async fn zcard(&self, key: &str) -> u64 {
        let mut conn = self.conn.clone();
        redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("ZCARD")
    }

    /// The admitted token of `u`, if position reports one.
    pub async fn token_of(&self, u: &UserId) -> Option<EntryToken> {
        match self.position(u).await {
            Observed::Settled(UserState::Admitted { token, .. }) => EntryToken::parse(&token),
            _ => None,
        }
    }

    /// Checks the counter identities every run must keep
    /// ([`queuegate_testkit::counters`]) and that no more visitors hold a
    /// slot than `max_active` allows.
    pub async fn assert_conserved(&self) {
        let mut conn = self.conn.clone();
        let c = queuegate_testkit::counters::Counters::read(&mut conn, &self.keys)
            .await
            .expect("the counters in one MULTI/EXEC");
        let broken = c.broken();
        assert!(broken.is_empty(), "{}", broken.join("\n"));
        assert!(
            c.active as u64 <= self.settings.max_active,
            "active {} over max_active {}",
            c.active,
            self.settings.max_active
        );
    }
}

/// Settings with short times, so expiry and abandonment happen within a
/// test: tokens live 1 s, leavers go after 1 s without a poll (no sleep
/// grace: `tests/engine/sleep.rs` gives one).
pub fn fast_settings() -> Settings {
    Settings {
        token_ttl_ms: 1_000,
        activation_jitter_ms: 0,
        status_ttl_ms: 5_000,
        abandon_after_ms: 1_000,
        sleep_grace_ms: 1_000,
        poll_min_ms: 100,
        poll_max_ms: 500,
        in_flight_ms: 1_000,
        retry_window_ms: 1_500,
        ..Settings::default()
    }
}

/// Runs one command (`args[0]` and its arguments) on `url`'s Redis, on a
/// connection of its own: an operator's `redis-cli` (`CONFIG SET`,
/// `REPLICAOF`, `SCRIPT KILL`, a script that blocks).
pub fn redis_cmd(url: &str, args: &[&str]) -> redis::RedisResult<redis::Value> {
    let mut conn = redis::Client::open(url)?.get_connection()?;
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query(&mut conn)
}
