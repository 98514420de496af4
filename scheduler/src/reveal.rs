//! A sealed draw's record, then its seed (docs/drop-day.md, *A draw anyone
//! can verify*): [`Reveal`] reads the sealed pre-queue page by page, writes
//! each page of leaves, and last the record's header with the Merkle root
//! and the committed seed, and the draw's key as the permutation's seed —
//! one `draw_reveal` call per [`step`](Reveal::step), like the placement.
//! The scheduler steps it within its tick budget, the bench times each
//! step. A commitment that names a beacon round is revealed only with that
//! round's value: until the beacon publishes it the step waits
//! ([`Revealed::Waiting`]), and the draw is not placed.

use queuegate_shared::beacon::BeaconRound;
use queuegate_shared::draw_proof::{
    self, draw_key, encode_page, leaf, leaf_node, parse_hash, salt, Beacon, DrawRecord, Hash,
    PAGE_SIZE, VERSION,
};
use queuegate_shared::fields::{commit as dc, COMMIT_PENDING};
use queuegate_shared::ops::{DrawReveal, DrawSeed, RevealStep, Sealed};
use queuegate_shared::QueueKeys;
use redis::aio::ConnectionLike;

use crate::beacon::{self as drand, BeaconError};
use crate::engine::{self, EngineError};

/// The commitment a sealed draw opens, as `draw_commit` keeps it.
#[derive(Clone)]
struct Committed {
    seed: Hash,
    salt_key: Hash,
    commitment: String,
    committed_at: u64,
    opens_at: Option<u64>,
    /// The beacon round named with it, if any.
    beacon: Option<BeaconRound>,
}

/// What a step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revealed {
    /// A page was written; more follow.
    Page,
    /// The record is whole and the seed revealed: the draw is placed from
    /// now on (with this key).
    Done(Box<DrawRecord>),
    /// The draw or its commitment moved on, or the lease is lost: nothing
    /// written; the next `draw_open` tells where it stands.
    Moved,
    /// Every page is written but the named beacon round's value could not
    /// be read (not out yet, or the beacon unreachable): nothing revealed;
    /// the next step asks again. The attempts so far, and why.
    Waiting(u32, BeaconError),
}

/// A sealed draw's reveal, from its first page on.
pub struct Reveal {
    sealed: Sealed,
    committed: Option<Committed>,
    /// Leaf nodes of the pages written so far.
    nodes: Vec<Hash>,
    /// Roots of the pages written so far.
    page_roots: Vec<Hash>,
    /// The named beacon round's value, once read.
    beacon: Option<Beacon>,
    /// Reads of the beacon that failed.
    attempts: u32,
}

impl std::fmt::Debug for Reveal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reveal")
            .field("sealed", &self.sealed)
            .field("pages", &self.page_roots.len())
            .finish_non_exhaustive()
    }
}

impl Reveal {
    /// The reveal of `sealed`.
    pub fn new(sealed: Sealed) -> Self {
        Reveal {
            sealed,
            committed: None,
            nodes: Vec::new(),
            page_roots: Vec::new(),
            beacon: None,
            attempts: 0,
        }
    }

    /// The draw being revealed.
    pub fn sealed(&self) -> &Sealed {
        &self.sealed
    }

    fn size(&self) -> u64 {
        self.sealed.end - self.sealed.base
    }

    /// Writes the next page, or the header and the seed after the last.
    pub async fn step<C>(
        &mut self,
        conn: &mut C,
        keys: &QueueKeys,
        owner: &str,
    ) -> Result<Revealed, EngineError>
    where
        C: ConnectionLike + Send,
    {
        let committed = match &self.committed {
            Some(c) => c.clone(),
            None => match read_commit(conn, keys).await? {
                Some(c) => self.committed.insert(c).clone(),
                None => return Ok(Revealed::Moved),
            },
        };
        let size = self.size();
        let from = self.page_roots.len() as u64 * PAGE_SIZE;
        if from < size {
            let to = (from + PAGE_SIZE).min(size);
            let users: Vec<String> = redis::cmd("ZRANGE")
                .arg(keys.draw())
                .arg(from)
                .arg(to - 1)
                .query_async(conn)
                .await
                .map_err(EngineError::Redis)?;
            if users.len() as u64 != to - from {
                return Ok(Revealed::Moved);
            }
            let mut leaves = Vec::with_capacity(users.len());
            let mut nodes = Vec::with_capacity(users.len());
            for (rank, user) in (from..).zip(&users) {
                let l = leaf(&salt(&committed.salt_key, user), user);
                // The rounds add up to the draw's size (`parse_rounds`).
                #[allow(clippy::expect_used)]
                let (round, _) = queuegate_shared::draw::slot_of_rank(&self.sealed.rounds, rank)
                    .expect("ranks stay within the draw's size");
                nodes.push(leaf_node(round, &l));
                leaves.push(l);
            }
            let written = engine::run(
                conn,
                &DrawReveal {
                    keys,
                    owner,
                    number: self.sealed.number,
                    commitment: &committed.commitment,
                    step: RevealStep::Page(from / PAGE_SIZE, &encode_page(&leaves)),
                },
            )
            .await?;
            if !written {
                return Ok(Revealed::Moved);
            }
            self.page_roots.push(draw_proof::root(&nodes));
            self.nodes.extend(nodes);
            return Ok(Revealed::Page);
        }
        if let (Some(named), None) = (&committed.beacon, &self.beacon) {
            match drand::value_of(named).await {
                Ok(value) => {
                    self.beacon = Some(Beacon {
                        source: named.source.clone(),
                        round: named.round,
                        value,
                    })
                }
                Err(e) => {
                    self.attempts += 1;
                    return Ok(Revealed::Waiting(self.attempts, e));
                }
            }
        }
        let record = self.record(keys, &committed);
        let header = serde_json::to_string(&record).unwrap_or_default();
        let key =
            DrawSeed::from_random(parse_hash("draw key", &record.draw_key).unwrap_or_default());
        let written = engine::run(
            conn,
            &DrawReveal {
                keys,
                owner,
                number: self.sealed.number,
                commitment: &committed.commitment,
                step: RevealStep::Reveal {
                    header: &header,
                    top: &encode_page(&self.page_roots),
                    key: &key,
                },
            },
        )
        .await?;
        Ok(if written {
            Revealed::Done(Box::new(record))
        } else {
            Revealed::Moved
        })
    }

    /// The public record, once every page is written.
    fn record(&self, keys: &QueueKeys, c: &Committed) -> DrawRecord {
        let root = draw_proof::root(&self.page_roots);
        // The value was checked as 32 bytes of hex when read.
        let beacon = self
            .beacon
            .as_ref()
            .and_then(|b| hex::decode(&b.value).ok())
            .unwrap_or_default();
        let queue = keys.queue().as_str();
        let size = self.size();
        DrawRecord {
            version: VERSION,
            queue: queue.to_string(),
            draw: self.sealed.number,
            commitment: c.commitment.clone(),
            committed_at: c.committed_at,
            opens_at: c.opens_at,
            seed: hex::encode(c.seed),
            beacon: self.beacon.clone(),
            registrants: size,
            rounds: self.sealed.rounds.clone(),
            root: hex::encode(root),
            draw_key: hex::encode(draw_key(&c.seed, &root, &beacon)),
            ticket_base: self.sealed.base,
            page_size: PAGE_SIZE,
            pages: size.div_ceil(PAGE_SIZE),
            leaves: format!(
                "/queue/draw?queue={queue}&draw={}&page={{page}}",
                self.sealed.number
            ),
        }
    }
}

/// The pending commitment; None when there is none (or it does not parse).
async fn read_commit<C>(conn: &mut C, keys: &QueueKeys) -> Result<Option<Committed>, EngineError>
where
    C: ConnectionLike + Send,
{
    let v: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(keys.draw_commit())
        .arg(&[
            dc::STATE,
            dc::SEED,
            dc::SALT_KEY,
            dc::COMMITMENT,
            dc::COMMITTED_AT,
            dc::OPENS_AT,
            dc::BEACON,
        ])
        .query_async(conn)
        .await
        .map_err(EngineError::Redis)?;
    let [state, seed, salt_key, commitment, committed_at, opens_at, beacon] =
        <[Option<String>; 7]>::try_from(v).unwrap_or_default();
    if state.as_deref() != Some(COMMIT_PENDING) {
        return Ok(None);
    }
    let parsed = (|| {
        Some(Committed {
            seed: parse_hash("seed", seed.as_deref()?).ok()?,
            salt_key: parse_hash("salt key", salt_key.as_deref()?).ok()?,
            commitment: commitment?,
            committed_at: committed_at?.parse().ok()?,
            opens_at: opens_at.and_then(|t| t.parse().ok()),
            // A named beacon that does not parse is no commitment we can
            // open: never revealed without it.
            beacon: match beacon {
                Some(b) => Some(serde_json::from_str(&b).ok()?),
                None => None,
            },
        })
    })();
    Ok(parsed)
}
