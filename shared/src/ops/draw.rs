//! The draw of a pre-queue at its opening (docs/drop-day.md): `draw_open`
//! seals it and fixes the seed; `draw_place` places it batch by batch on
//! the tickets a permutation drawn from that seed assigns (the scheduler
//! computes it: every holder that takes over a running draw computes the
//! same one).

use crate::keys::QueueKeys;
use crate::reply::ReplyKind;
use crate::script::{Invocation, Operation, DRAW_OPEN, DRAW_PLACE, DRAW_REVEAL, DRAW_SHUFFLE};
use crate::value::{DecodeError, Fields, Value};

/// A draw's seed: 32 bytes from the scheduler's CSPRNG, stored as hex.
#[derive(Clone, PartialEq, Eq)]
pub struct DrawSeed([u8; 32]);

impl DrawSeed {
    /// A seed from 32 random bytes.
    pub fn from_random(bytes: [u8; 32]) -> Self {
        DrawSeed(bytes)
    }

    /// Parses 64 hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = hex::decode(text).ok()?;
        Some(DrawSeed(bytes.try_into().ok()?))
    }

    /// The seed as stored.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The seed's bytes.
    pub fn bytes(&self) -> [u8; 32] {
        self.0
    }
}

impl std::fmt::Debug for DrawSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DrawSeed(…)")
    }
}

/// Each tick's look at the pre-queue; seals it after its opening.
#[derive(Debug, Clone, Copy)]
pub struct DrawOpen<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The caller's lease owner id.
    pub owner: &'a str,
    /// A fresh seed, kept only if the running draw has none yet; None
    /// leaves a sealed draw without one until its committed seed is
    /// revealed ([`DrawReveal`]).
    pub seed: Option<&'a DrawSeed>,
    /// A fresh commitment, kept as the next draw's when none is pending
    /// (docs/drop-day.md, *A draw anyone can verify*).
    pub commit: Option<&'a FreshCommit>,
}

/// A secret seed, a salt key and the seed's commitment, fresh from the
/// CSPRNG, for `draw_open` to keep if the next draw has none.
#[derive(Clone)]
pub struct FreshCommit {
    /// The secret seed.
    pub seed: [u8; 32],
    /// The key of the registrants' salts.
    pub salt_key: [u8; 32],
}

impl std::fmt::Debug for FreshCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FreshCommit(…)")
    }
}

/// A sealed draw waiting for its committed seed: its record is written and
/// its seed revealed by [`DrawReveal`] before anyone is placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The last ticket before the reserved range.
    pub base: u64,
    /// The last ticket of the range.
    pub end: u64,
    /// The rounds' sizes.
    pub rounds: Vec<u64>,
    /// The draw's number.
    pub number: u64,
    /// Whether this call kept the fresh commitment (a late one: after the
    /// opening).
    pub committed: bool,
}

/// A running draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drawing {
    /// The last ticket before the reserved range.
    pub base: u64,
    /// The last ticket of the range.
    pub end: u64,
    /// Visitors placed so far (the cursor, by rank).
    pub done: u64,
    /// The permutation's seed.
    pub seed: DrawSeed,
    /// The sizes of the draw's rounds, in rank order (they add up to
    /// [`size`](Drawing::size)): round 1 holds each address group's first
    /// pre-queued identity, round 2 each second one, and so on; each round
    /// is drawn on its own tickets, ahead of the next.
    pub rounds: Vec<u64>,
    /// Whether the seats of its address groups with more than one
    /// identity are still to be dealt among them ([`DrawShuffle`]):
    /// nobody is placed before.
    pub deal_pending: bool,
}

impl Drawing {
    /// Visitors the draw places in all.
    pub fn size(&self) -> u64 {
        self.end - self.base
    }
}

/// A draw's rounds as `draw_open` sends them: `'3,0,1'` (every round from
/// round 1, an empty one as 0); `''` (a draw whose rounds were not kept)
/// is one round of all `size` visitors. None when they do not parse or do
/// not add up to `size`.
pub fn parse_rounds(text: &str, size: u64) -> Option<Vec<u64>> {
    if text.is_empty() {
        return Some(if size == 0 { Vec::new() } else { vec![size] });
    }
    let rounds = text
        .split(',')
        .map(|n| n.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    let total = rounds.iter().try_fold(0u64, |sum, &n| sum.checked_add(n))?;
    (total == size).then_some(rounds)
}

/// What `draw_open` saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DrawState {
    /// The caller does not hold the lease; nothing changed.
    NotOwner,
    /// No draw runs; this many visitors are pre-queued.
    Idle {
        /// The pre-queue's size.
        pre_queued: u64,
        /// Whether this call kept the fresh commitment.
        committed: bool,
    },
    /// A draw runs (maybe just sealed).
    Drawing(Drawing),
    /// A draw is sealed and waits for its seed.
    Sealed(Sealed),
}

impl Operation for DrawOpen<'_> {
    type Reply = DrawState;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &DRAW_OPEN,
            keys: vec![
                k.pre(),
                k.draw(),
                k.seq(),
                k.config(),
                k.lock(),
                k.groups(),
                k.waiting(),
                k.members(),
                k.draw_members(),
                k.moved(),
                k.draw_moved(),
                k.draw_commit(),
            ],
            args: {
                let mut args = vec![
                    self.owner.to_string(),
                    self.seed.map(DrawSeed::to_hex).unwrap_or_default(),
                ];
                if let Some(c) = self.commit {
                    args.extend([
                        hex::encode(c.seed),
                        hex::encode(c.salt_key),
                        hex::encode(crate::draw_proof::commitment(&c.seed)),
                    ]);
                }
                args
            },
        }
    }

    fn decode(&self, value: Value) -> Result<DrawState, DecodeError> {
        let f = Fields::new("draw_open", value)?;
        match f.kind(0)? {
            ReplyKind::NotOwner => Ok(DrawState::NotOwner),
            ReplyKind::Idle => Ok(DrawState::Idle {
                pre_queued: f.uint(1)?,
                committed: f.len() > 2 && f.uint(2)? == 1,
            }),
            ReplyKind::Drawing if f.text(4)?.is_empty() => {
                let (base, end) = (f.uint(1)?, f.uint(2)?);
                let size = end
                    .checked_sub(base)
                    .ok_or_else(|| f.error("a draw ends before its base"))?;
                let rounds = f.text(5)?;
                Ok(DrawState::Sealed(Sealed {
                    base,
                    end,
                    rounds: parse_rounds(rounds, size).ok_or_else(|| {
                        f.error(format!(
                            "the draw's rounds {rounds:?} do not add up to {size}"
                        ))
                    })?,
                    number: f.uint(7)?,
                    committed: f.len() > 8 && f.uint(8)? == 1,
                }))
            }
            ReplyKind::Drawing => {
                let seed = f.text(4)?;
                let mut drawing = Drawing {
                    base: f.uint(1)?,
                    end: f.uint(2)?,
                    done: f.uint(3)?,
                    seed: DrawSeed::parse(seed)
                        .ok_or_else(|| f.error("the stored seed is not 64 hex digits"))?,
                    rounds: Vec::new(),
                    deal_pending: match f.text(6)? {
                        "" | crate::fields::DRAW_SHUFFLE_DEALT => false,
                        crate::fields::DRAW_SHUFFLE_PENDING => true,
                        other => return Err(f.error(format!("unknown draw_shuffle {other:?}"))),
                    },
                };
                if drawing.end < drawing.base || drawing.done > drawing.size() {
                    return Err(f.error(format!("inconsistent draw {drawing:?}")));
                }
                let rounds = f.text(5)?;
                drawing.rounds = parse_rounds(rounds, drawing.size()).ok_or_else(|| {
                    f.error(format!(
                        "the draw's rounds {rounds:?} do not add up to its {} visitors",
                        drawing.size()
                    ))
                })?;
                Ok(DrawState::Drawing(drawing))
            }
            other => Err(f.unexpected(other)),
        }
    }
}

/// Places the next batch of a running draw.
#[derive(Debug, Clone, Copy)]
pub struct DrawPlace<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The caller's lease owner id.
    pub owner: &'a str,
    /// The draw as `draw_open` reported it (`done` is the batch's start).
    pub draw: &'a Drawing,
    /// The permutation's entries from `draw.done` on (at most a batch).
    pub places: &'a [u64],
}

/// What one batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// The caller does not hold the lease; nothing changed.
    NotOwner,
    /// The cursor is not where the caller thought; nothing changed.
    Moved {
        /// Where it is.
        done: u64,
    },
    /// The batch was placed.
    Batch {
        /// Visitors put in line.
        placed: u64,
        /// Visitors who had stopped polling, dropped.
        dropped: u64,
        /// Visitors left to place (0: the draw is over).
        left: u64,
    },
}

impl Operation for DrawPlace<'_> {
    type Reply = Placed;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let mut args = vec![
            self.owner.to_string(),
            k.base().to_string(),
            self.draw.done.to_string(),
        ];
        args.extend(
            self.places
                .iter()
                .map(|p| (self.draw.base + 1 + p).to_string()),
        );
        Invocation {
            script: &DRAW_PLACE,
            keys: vec![k.draw(), k.waiting(), k.config(), k.stats(), k.lock()],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<Placed, DecodeError> {
        let f = Fields::new("draw_place", value)?;
        match f.kind(0)? {
            ReplyKind::NotOwner => Ok(Placed::NotOwner),
            ReplyKind::Moved => Ok(Placed::Moved { done: f.uint(1)? }),
            ReplyKind::Placed => Ok(Placed::Batch {
                placed: f.uint(1)?,
                dropped: f.uint(2)?,
                left: f.uint(3)?,
            }),
            other => Err(f.unexpected(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_round_trip_as_hex_and_stay_out_of_logs() {
        let s = DrawSeed::from_random([0xab; 32]);
        assert_eq!(DrawSeed::parse(&s.to_hex()), Some(s.clone()));
        assert_eq!(DrawSeed::parse("abc"), None);
        assert_eq!(DrawSeed::parse(&"zz".repeat(32)), None);
        assert_eq!(format!("{s:?}"), "DrawSeed(…)");
    }

    #[test]
    fn rounds_parse_and_add_up() {
        assert_eq!(parse_rounds("3,1,1", 5), Some(vec![3, 1, 1]));
        assert_eq!(
            parse_rounds("2,0,3", 5),
            Some(vec![2, 0, 3]),
            "an empty round"
        );
        assert_eq!(
            parse_rounds("", 4),
            Some(vec![4]),
            "a draw sealed before rounds"
        );
        assert_eq!(parse_rounds("", 0), Some(vec![]));
        for (bad, size) in [("3,1", 5), ("3,,2", 5), ("0,5", 6), ("x", 1), ("-1,6", 5)] {
            assert_eq!(parse_rounds(bad, size), None, "{bad:?} of {size}");
        }
        assert_eq!(
            parse_rounds(&format!("{},1", u64::MAX), 0),
            None,
            "no overflow"
        );
    }
}

/// One call of a sealed draw's reveal: a page of its record's leaves, or
/// last the header and the seed.
#[derive(Debug, Clone, Copy)]
pub struct DrawReveal<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The caller's lease owner id.
    pub owner: &'a str,
    /// The draw's number.
    pub number: u64,
    /// The commitment the record opens (hex).
    pub commitment: &'a str,
    /// What to write.
    pub step: RevealStep<'a>,
}

/// What a [`DrawReveal`] call writes.
#[derive(Debug, Clone, Copy)]
pub enum RevealStep<'a> {
    /// Page `k`'s leaves (hex).
    Page(u64, &'a str),
    /// The header (JSON), the pages' roots (hex) and the draw's key.
    Reveal {
        /// The record's public JSON.
        header: &'a str,
        /// The pages' roots, hex.
        top: &'a str,
        /// The permutation's key: `draw_seed` from now on.
        key: &'a DrawSeed,
    },
}

impl Operation for DrawReveal<'_> {
    /// True when written; false when the draw or the commitment moved on
    /// (or the lease was lost): nothing written.
    type Reply = bool;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let mut args = vec![
            self.owner.to_string(),
            self.number.to_string(),
            self.commitment.to_string(),
        ];
        match self.step {
            RevealStep::Page(n, leaves) => {
                args.extend(["page".to_string(), n.to_string(), leaves.to_string()])
            }
            RevealStep::Reveal { header, top, key } => args.extend([
                "reveal".to_string(),
                header.to_string(),
                top.to_string(),
                key.to_hex(),
            ]),
        }
        Invocation {
            script: &DRAW_REVEAL,
            keys: vec![
                k.config(),
                k.lock(),
                k.draw_commit(),
                k.draw_record(self.number),
            ],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<bool, DecodeError> {
        let f = Fields::new("draw_reveal", value)?;
        match f.kind(0)? {
            ReplyKind::Ok => Ok(true),
            ReplyKind::NotOwner | ReplyKind::Moved => Ok(false),
            other => Err(f.unexpected(other)),
        }
    }
}

/// Writes one batch of a draw's deal: the new scores of identities of
/// address groups with more than one (`crate::draw::deal`); `last` ends
/// the dealing, after which the draw is placed.
#[derive(Debug, Clone, Copy)]
pub struct DrawShuffle<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The caller's lease owner id.
    pub owner: &'a str,
    /// The seed the deal was computed from.
    pub seed: &'a DrawSeed,
    /// (user, new score) pairs.
    pub scores: &'a [(String, u64)],
    /// Whether this is the deal's last batch.
    pub last: bool,
}

/// What one batch of the deal did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dealt {
    /// The caller does not hold the lease; nothing changed.
    NotOwner,
    /// No deal is pending under this seed; nothing changed.
    Moved,
    /// The batch is written (and the dealing over, if it was the last).
    Written(u64),
}

impl Operation for DrawShuffle<'_> {
    type Reply = Dealt;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let mut args = vec![
            self.owner.to_string(),
            self.seed.to_hex(),
            if self.last { "last" } else { "" }.to_string(),
        ];
        for (user, score) in self.scores {
            args.push(user.clone());
            args.push(score.to_string());
        }
        Invocation {
            script: &DRAW_SHUFFLE,
            keys: vec![k.draw(), k.config(), k.lock(), k.draw_members()],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<Dealt, DecodeError> {
        let f = Fields::new("draw_shuffle", value)?;
        match f.kind(0)? {
            ReplyKind::NotOwner => Ok(Dealt::NotOwner),
            ReplyKind::Moved => Ok(Dealt::Moved),
            ReplyKind::Ok => Ok(Dealt::Written(f.uint(1)?)),
            other => Err(f.unexpected(other)),
        }
    }
}
