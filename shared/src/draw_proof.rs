//! A draw anyone can verify (docs/drop-day.md, *A draw anyone can
//! verify*): the seed's commitment, the registrants' Merkle tree, the
//! draw's key, the public record and a visitor's receipt, and the checks
//! `queuegate-verify` runs on them. Pure functions: the scheduler builds
//! the record with them, the edge a receipt, the verifier checks both.
//!
//! Every hash is SHA-256; every input is written out here and in the docs,
//! so an independent implementation (tests/golden/draw_vectors.py) gives
//! the same bytes.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::draw::{slot_of_rank, DrawPermutation};

/// A 32-byte hash or secret.
pub type Hash = [u8; 32];

/// Leaves per page of the record: a power of two, so a page is a whole
/// subtree of the Merkle tree and its root one node of the tree above.
pub const PAGE_SIZE: u64 = 1024;

/// The record's format.
pub const VERSION: u32 = 1;

const SALT_CONTEXT: &[u8] = b"queuegate-salt-v1";
const LEAF_CONTEXT: &[u8] = b"queuegate-leaf-v1";
const KEY_CONTEXT: &[u8] = b"queuegate-draw-key-v1";

fn sha256(parts: &[&[u8]]) -> Hash {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// The commitment to a seed: `SHA-256(seed)`, published when the
/// pre-queue opens.
pub fn commitment(seed: &Hash) -> Hash {
    sha256(&[seed])
}

/// A visitor's salt: `HMAC-SHA-256(salt_key, "queuegate-salt-v1" ‖ uid)`.
/// The salt key is never published, so a leaf does not tell whether a
/// guessed id registered; the visitor learns its own salt in its receipt.
pub fn salt(salt_key: &Hash, uid: &str) -> Hash {
    // HMAC takes a key of any length: this cannot fail.
    #[allow(clippy::expect_used)]
    let mut m = Hmac::<Sha256>::new_from_slice(salt_key).expect("HMAC takes any key length");
    m.update(SALT_CONTEXT);
    m.update(uid.as_bytes());
    m.finalize().into_bytes().into()
}

/// A registrant's published leaf: `SHA-256("queuegate-leaf-v1" ‖ salt ‖
/// uid)`.
pub fn leaf(salt: &Hash, uid: &str) -> Hash {
    sha256(&[LEAF_CONTEXT, salt, uid.as_bytes()])
}

/// The tree's node of a leaf in round `round`: `SHA-256(0x00 ‖ round (8
/// bytes, big-endian) ‖ leaf)`: the tree fixes each registrant's round.
pub fn leaf_node(round: u64, leaf: &Hash) -> Hash {
    sha256(&[&[0], &round.to_be_bytes(), leaf])
}

/// An inner node: `SHA-256(0x01 ‖ left ‖ right)`.
pub fn parent(left: &Hash, right: &Hash) -> Hash {
    sha256(&[&[1], left, right])
}

/// The key of the draw's permutation: `SHA-256("queuegate-draw-key-v1" ‖
/// seed ‖ root ‖ beacon)` (`beacon` empty when there is none): the seed
/// alone does not fix the draw, the registrants and the beacon do too.
pub fn draw_key(seed: &Hash, root: &Hash, beacon: &[u8]) -> Hash {
    sha256(&[KEY_CONTEXT, seed, root, beacon])
}

/// One level up: pairs hashed left to right, a last odd node carried up
/// unchanged.
fn level_up(nodes: &[Hash]) -> Vec<Hash> {
    nodes
        .chunks(2)
        .map(|pair| match pair {
            [l, r] => parent(l, r),
            [one] => *one,
            _ => unreachable!("chunks(2) gives one or two"),
        })
        .collect()
}

/// The root of `nodes` (leaf nodes in index order); all zeros for none.
pub fn root(nodes: &[Hash]) -> Hash {
    if nodes.is_empty() {
        return [0; 32];
    }
    let mut level = nodes.to_vec();
    while level.len() > 1 {
        level = level_up(&level);
    }
    level[0]
}

/// The siblings from node `index` of `nodes` up to their root (a level
/// where the node is carried up has none).
pub fn proof(nodes: &[Hash], index: usize) -> Vec<Hash> {
    let mut out = Vec::new();
    let mut level = nodes.to_vec();
    let mut i = index;
    while level.len() > 1 {
        let sibling = i ^ 1;
        if let Some(s) = level.get(sibling) {
            out.push(*s);
        }
        level = level_up(&level);
        i /= 2;
    }
    out
}

/// The root that `node` at `index` of a tree of `size` leaves gives with
/// `proof`; None when the proof has too few or too many siblings.
pub fn root_from_proof(node: &Hash, index: u64, size: u64, proof: &[Hash]) -> Option<Hash> {
    if index >= size {
        return None;
    }
    let (mut h, mut i, mut count) = (*node, index, size);
    let mut siblings = proof.iter();
    while count > 1 {
        if !(i.is_multiple_of(2) && i + 1 == count) {
            let s = siblings.next()?;
            h = if i.is_multiple_of(2) {
                parent(&h, s)
            } else {
                parent(s, &h)
            };
        }
        i /= 2;
        count = count.div_ceil(2);
    }
    siblings.next().is_none().then_some(h)
}

/// A randomness beacon round named with the opening (a drand round) and
/// its value, mixed into the draw's key (docs/drop-day.md, *The beacon*).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Beacon {
    /// The beacon: `{url}/{chain hash}` of a drand HTTP endpoint.
    pub source: String,
    /// The round named in advance: the first published after the opening.
    pub round: u64,
    /// Its randomness (hex), published by the beacon after the registrants
    /// are fixed.
    pub value: String,
}

/// The public record of a sealed draw (`GET /queue/draw?queue=Q&draw=N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrawRecord {
    /// The record's format ([`VERSION`]).
    pub version: u32,
    /// The queue.
    pub queue: String,
    /// The draw's number (the queue's seals counted).
    pub draw: u64,
    /// `SHA-256(seed)`, hex: published before the opening.
    pub commitment: String,
    /// When it was published (epoch ms).
    pub committed_at: u64,
    /// The opening the draw was held at (epoch ms): the registrant set was
    /// open until then.
    pub opens_at: Option<u64>,
    /// The seed, hex, revealed after the root was fixed.
    pub seed: String,
    /// The beacon mixed in, if any.
    pub beacon: Option<Beacon>,
    /// Registrants drawn.
    pub registrants: u64,
    /// The rounds' sizes, from round 1.
    pub rounds: Vec<u64>,
    /// The Merkle root over the registrants' leaf nodes, hex.
    pub root: String,
    /// The permutation's key, [`draw_key`], hex.
    pub draw_key: String,
    /// The last ticket before the draw's places (place p, 1-based, holds
    /// ticket `ticket_base + p`).
    pub ticket_base: u64,
    /// Leaves per page.
    pub page_size: u64,
    /// Pages of leaves.
    pub pages: u64,
    /// Where page `{page}` is served.
    pub leaves: String,
}

/// One page of a record's leaves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LeafPage {
    /// The draw.
    pub draw: u64,
    /// The page (0-based).
    pub page: u64,
    /// The index of its first leaf.
    pub from: u64,
    /// The leaves, hex, in index order.
    pub leaves: Vec<String>,
}

/// A visitor's proof of its place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The queue.
    pub queue: String,
    /// The draw.
    pub draw: u64,
    /// The visitor's id.
    pub visitor: String,
    /// Its salt, hex.
    pub salt: String,
    /// Its leaf, hex.
    pub leaf: String,
    /// The leaf's index in the record.
    pub index: u64,
    /// Its round.
    pub round: u64,
    /// The siblings up to the root, hex.
    pub proof: Vec<String>,
    /// The record's root, hex.
    pub root: String,
    /// The place the draw gave it (1-based, within the draw).
    pub place: u64,
}

/// What a check found wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// A field is not what it must be (hex of 32 bytes, a known version).
    #[error("malformed {0}")]
    Malformed(String),
    /// The seed does not hash to the commitment.
    #[error("the seed does not open the commitment")]
    Commitment,
    /// The commitment came after the opening.
    #[error("the commitment was published at {committed_at}, after the opening at {opens_at}")]
    LateCommitment { committed_at: u64, opens_at: u64 },
    /// Counts disagree.
    #[error("{0}")]
    Count(String),
    /// The leaves do not give the root.
    #[error("the leaves give root {computed}, the record says {claimed}")]
    Root { computed: String, claimed: String },
    /// The draw's key is not the one the seed, root and beacon give.
    #[error("the draw key is not SHA-256(context ‖ seed ‖ root ‖ beacon)")]
    DrawKey,
    /// The recomputed places break a round's block.
    #[error("place {place} of index {index} is outside round {round}'s block")]
    Rounds { index: u64, round: u64, place: u64 },
    /// The receipt's leaf is not its salt and visitor.
    #[error("the receipt's leaf is not SHA-256(context ‖ salt ‖ visitor)")]
    Leaf,
    /// The receipt's proof does not reach the root.
    #[error("the receipt's Merkle proof does not give the record's root")]
    Proof,
    /// The receipt claims another place than the draw gives.
    #[error("the receipt says place {claimed}; the draw gives index {index} place {computed}")]
    Place {
        index: u64,
        claimed: u64,
        computed: u64,
    },
    /// The receipt belongs to another draw.
    #[error("the receipt is for {0}, the record for {1}")]
    OtherDraw(String, String),
}

/// 32 bytes from hex.
pub fn parse_hash(what: &str, text: &str) -> Result<Hash, VerifyError> {
    hex::decode(text)
        .ok()
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| VerifyError::Malformed(format!("{what} {text:?}")))
}

/// What the edge reads of a record's header to give a receipt: who holds
/// which place. Read from the same JSON as [`DrawRecord`] (the rest of it
/// is passed on as text): a reader of five fields is a fifth of the
/// wasm's reader of sixteen.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrawPlaces {
    /// Registrants drawn.
    pub registrants: u64,
    /// The rounds' sizes, from round 1.
    pub rounds: Vec<u64>,
    /// The Merkle root, hex.
    pub root: String,
    /// The permutation's key, hex.
    pub draw_key: String,
    /// The last ticket before the draw's places.
    pub ticket_base: u64,
}

impl DrawPlaces {
    /// The round of leaf `index`; None past the last.
    pub fn round_of(&self, index: u64) -> Option<u64> {
        round_of(&self.rounds, index)
    }

    /// The leaf index at place `place` (0-based, within the draw); None
    /// past the last.
    pub fn index_at(&self, place: u64) -> Result<Option<u64>, VerifyError> {
        index_at(&self.rounds, &self.draw_key, place)
    }
}

/// The round of leaf `index` in a draw of `rounds`; None past the last.
fn round_of(rounds: &[u64], index: u64) -> Option<u64> {
    slot_of_rank(rounds, index).map(|(round, _)| round)
}

/// The permutation `draw_key` (hex) fixes.
fn permutation(draw_key: &str) -> Result<DrawPermutation, VerifyError> {
    Ok(DrawPermutation::new(&parse_hash("draw key", draw_key)?))
}

/// The leaf index at place `place` (0-based) of a draw of `rounds` by the
/// permutation of `draw_key`: the permutation undone. None past the last.
fn index_at(rounds: &[u64], draw_key: &str, place: u64) -> Result<Option<u64>, VerifyError> {
    let p = permutation(draw_key)?;
    let mut start = 0u64;
    for (r, &n) in rounds.iter().enumerate() {
        if place < start + n {
            return Ok(Some(start + p.index_of(r as u64 + 1, n, place - start)));
        }
        start += n;
    }
    Ok(None)
}

impl DrawRecord {
    /// The round of leaf `index`; None past the last.
    pub fn round_of(&self, index: u64) -> Option<u64> {
        round_of(&self.rounds, index)
    }

    /// The permutation the record's key fixes.
    pub fn permutation(&self) -> Result<DrawPermutation, VerifyError> {
        permutation(&self.draw_key)
    }

    /// The checks that need no leaves: the seed opens the commitment,
    /// which came before the opening; the rounds add up; the draw's key
    /// is the one the seed, root and beacon give.
    pub fn check_header(&self) -> Result<(), VerifyError> {
        if self.version != VERSION {
            return Err(VerifyError::Malformed(format!("version {}", self.version)));
        }
        let seed = parse_hash("seed", &self.seed)?;
        if commitment(&seed) != parse_hash("commitment", &self.commitment)? {
            return Err(VerifyError::Commitment);
        }
        if let Some(opens_at) = self.opens_at {
            if self.committed_at > opens_at {
                return Err(VerifyError::LateCommitment {
                    committed_at: self.committed_at,
                    opens_at,
                });
            }
        }
        let total = self
            .rounds
            .iter()
            .try_fold(0u64, |s, &n| s.checked_add(n))
            .ok_or_else(|| VerifyError::Count("the rounds overflow".into()))?;
        if total != self.registrants {
            return Err(VerifyError::Count(format!(
                "the rounds add up to {total}, the record has {} registrants",
                self.registrants
            )));
        }
        if self.pages != self.registrants.div_ceil(self.page_size.max(1))
            || self.page_size != PAGE_SIZE
        {
            return Err(VerifyError::Count(format!(
                "{} pages of {} for {} registrants",
                self.pages, self.page_size, self.registrants
            )));
        }
        let root = parse_hash("root", &self.root)?;
        let beacon = match &self.beacon {
            Some(b) => hex::decode(&b.value)
                .map_err(|_| VerifyError::Malformed(format!("beacon value {:?}", b.value)))?,
            None => Vec::new(),
        };
        if draw_key(&seed, &root, &beacon) != parse_hash("draw key", &self.draw_key)? {
            return Err(VerifyError::DrawKey);
        }
        Ok(())
    }

    /// The whole record: [`check_header`](Self::check_header), the leaves
    /// give the root, and every index's place lies in its round's block.
    /// Returns each index's place (0-based, within the draw).
    pub fn check(&self, leaves: &[Hash]) -> Result<Vec<u64>, VerifyError> {
        self.check_header()?;
        if leaves.len() as u64 != self.registrants {
            return Err(VerifyError::Count(format!(
                "{} leaves for {} registrants",
                leaves.len(),
                self.registrants
            )));
        }
        let mut nodes = Vec::with_capacity(leaves.len());
        let mut index = 0u64;
        for (r, &n) in self.rounds.iter().enumerate() {
            for _ in 0..n {
                nodes.push(leaf_node(r as u64 + 1, &leaves[index as usize]));
                index += 1;
            }
        }
        let computed = hex::encode(root(&nodes));
        if computed != self.root {
            return Err(VerifyError::Root {
                computed,
                claimed: self.root.clone(),
            });
        }
        let p = self.permutation()?;
        let mut places = Vec::with_capacity(leaves.len());
        let mut seen = vec![false; leaves.len()];
        let mut start = 0u64;
        for (r, &n) in self.rounds.iter().enumerate() {
            let round = r as u64 + 1;
            for i in 0..n {
                let place = start + p.within(round, n, i);
                let index = start + i;
                if !(start..start + n).contains(&place) || seen[place as usize] {
                    return Err(VerifyError::Rounds {
                        index,
                        round,
                        place,
                    });
                }
                seen[place as usize] = true;
                places.push(place);
            }
            start += n;
        }
        Ok(places)
    }

    /// Checks `receipt` against this record (whose header is checked):
    /// its leaf is its salt and visitor, its proof reaches the root, and
    /// the draw gives its index the place it claims.
    pub fn check_receipt(&self, receipt: &Receipt) -> Result<(), VerifyError> {
        self.check_header()?;
        if receipt.queue != self.queue || receipt.draw != self.draw {
            return Err(VerifyError::OtherDraw(
                format!("{} draw {}", receipt.queue, receipt.draw),
                format!("{} draw {}", self.queue, self.draw),
            ));
        }
        let salt = parse_hash("salt", &receipt.salt)?;
        let claimed_leaf = parse_hash("leaf", &receipt.leaf)?;
        if leaf(&salt, &receipt.visitor) != claimed_leaf {
            return Err(VerifyError::Leaf);
        }
        let round = self.round_of(receipt.index).ok_or_else(|| {
            VerifyError::Count(format!(
                "index {} of {} registrants",
                receipt.index, self.registrants
            ))
        })?;
        if round != receipt.round {
            return Err(VerifyError::Count(format!(
                "the receipt says round {}, index {} is in round {round}",
                receipt.round, receipt.index
            )));
        }
        let siblings = receipt
            .proof
            .iter()
            .map(|h| parse_hash("proof", h))
            .collect::<Result<Vec<_>, _>>()?;
        let node = leaf_node(round, &claimed_leaf);
        let reached = root_from_proof(&node, receipt.index, self.registrants, &siblings);
        if reached != Some(parse_hash("root", &self.root)?) || receipt.root != self.root {
            return Err(VerifyError::Proof);
        }
        let computed = self.place_of(receipt.index)? + 1;
        if computed != receipt.place {
            return Err(VerifyError::Place {
                index: receipt.index,
                claimed: receipt.place,
                computed,
            });
        }
        Ok(())
    }

    /// The place (0-based, within the draw) the draw gives leaf `index`.
    pub fn place_of(&self, index: u64) -> Result<u64, VerifyError> {
        let (round, i) = slot_of_rank(&self.rounds, index)
            .ok_or_else(|| VerifyError::Count(format!("index {index} past the last")))?;
        self.permutation()?
            .place(&self.rounds, round, i)
            .ok_or_else(|| VerifyError::Count(format!("index {index} has no place")))
    }

    /// The leaf index at place `place` (0-based, within the draw): the
    /// permutation undone. None past the last.
    pub fn index_at(&self, place: u64) -> Result<Option<u64>, VerifyError> {
        index_at(&self.rounds, &self.draw_key, place)
    }
}

/// A page's leaves as stored: their hex, concatenated.
pub fn encode_page(leaves: &[Hash]) -> String {
    leaves.iter().map(hex::encode).collect()
}

/// A stored page's leaves; None when it is not whole 32-byte hashes.
pub fn decode_page(text: &str) -> Option<Vec<Hash>> {
    if !text.len().is_multiple_of(64) {
        return None;
    }
    (0..text.len() / 64)
        .map(|i| parse_hash("leaf", text.get(i * 64..i * 64 + 64)?).ok())
        .collect()
}

/// The Merkle proof of leaf `index` from its page's leaf nodes and the
/// roots of all pages (the tree above them).
pub fn page_proof(page_nodes: &[Hash], page_roots: &[Hash], index: u64) -> Vec<Hash> {
    let within = (index % PAGE_SIZE) as usize;
    let page = (index / PAGE_SIZE) as usize;
    let mut out = proof(page_nodes, within);
    out.extend(proof(page_roots, page));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(b: u8) -> Hash {
        [b; 32]
    }

    #[test]
    fn every_proof_reaches_the_root() {
        for size in [1usize, 2, 3, 5, 8, 13, 33] {
            let nodes: Vec<Hash> = (0..size).map(|i| leaf_node(1, &h(i as u8))).collect();
            let r = root(&nodes);
            for i in 0..size {
                let p = proof(&nodes, i);
                assert_eq!(
                    root_from_proof(&nodes[i], i as u64, size as u64, &p),
                    Some(r),
                    "{size} {i}"
                );
                let mut short = p.clone();
                if short.pop().is_some() {
                    assert_ne!(
                        root_from_proof(&nodes[i], i as u64, size as u64, &short),
                        Some(r)
                    );
                }
                let mut long = p.clone();
                long.push(h(9));
                assert_eq!(
                    root_from_proof(&nodes[i], i as u64, size as u64, &long),
                    None
                );
            }
        }
    }

    #[test]
    fn pages_are_subtrees() {
        let size = 2 * PAGE_SIZE as usize + 37;
        let nodes: Vec<Hash> = (0..size)
            .map(|i| leaf_node(1, &sha256(&[&(i as u64).to_be_bytes()])))
            .collect();
        let page_roots: Vec<Hash> = nodes.chunks(PAGE_SIZE as usize).map(root).collect();
        assert_eq!(root(&page_roots), root(&nodes));
        for i in [0usize, 5, 1023, 1024, 2047, 2048, size - 1] {
            let page = &nodes[i / 1024 * 1024..((i / 1024 + 1) * 1024).min(size)];
            let p = page_proof(page, &page_roots, i as u64);
            assert_eq!(p, proof(&nodes, i), "{i}");
        }
    }

    #[test]
    fn a_page_round_trips() {
        let leaves = vec![h(1), h(0xab)];
        assert_eq!(decode_page(&encode_page(&leaves)), Some(leaves));
        assert_eq!(decode_page("abc"), None);
        assert_eq!(decode_page(""), Some(vec![]));
    }
}
