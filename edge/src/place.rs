//! The place cookie: a visitor's ticket in one queue's line, or its slot
//! in a pre-queue's draw, signed with the identity key and bound to the
//! visitor, so the edge can answer a far-back or pre-queued poll without
//! Redis (docs/uncapped-line.md). It grants nothing: admission, the token
//! and everything after it stay with Redis, and a visitor near the head
//! is always asked there.
//!
//! `<queue>.<ticket>-<seen>.<mac>` holds a ticket and when the visitor last
//! asked Redis (epoch seconds: the edge sends a near visitor to Redis when
//! that is `liveness_ms` old, so it proves it is alive); `<queue>.s<draw>-<round>-<index>.<mac>`
//! a slot in draw number `draw` (the seals counted), so a slot of one
//! pre-queue never reads another's draw.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;
use queuegate_shared::draw::DrawSlot;
use queuegate_shared::{QueueId, UserId};

use crate::identity::MacKey;
use crate::mac::HmacSha256;

/// Domain separation for place MACs (the key also signs visitor cookies).
const PLACE_CONTEXT: &[u8] = b"queuegate-place-v1:";

/// Domain separation for slot MACs.
const SLOT_CONTEXT: &[u8] = b"queuegate-slot-v1:";

/// What a place cookie holds: the domain's, so the snapshot's answer
/// (`queuegate_shared::snapshot::answer`) reads it without the cookie.
pub use queuegate_shared::snapshot::answer::Held;

/// The MAC over a slot, fed and ready to finalize or verify.
fn fed_slot(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    draw: u64,
    slot: DrawSlot,
) -> HmacSha256 {
    let mut m = key.keyed();
    m.update(SLOT_CONTEXT);
    m.update(queue.as_str().as_bytes());
    m.update(b"\0");
    m.update(user.as_str().as_bytes());
    m.update(b"\0");
    m.update(&draw.to_be_bytes());
    m.update(&slot.round.to_be_bytes());
    m.update(&slot.index.to_be_bytes());
    m
}

/// The cookie value for `user`'s `slot` in `queue`'s draw number `draw`.
pub fn mint_slot(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    draw: u64,
    slot: DrawSlot,
) -> String {
    let sig = URL_SAFE_NO_PAD.encode(
        &fed_slot(key, queue, user, draw, slot)
            .finalize()
            .into_bytes()[..MAC_LEN],
    );
    format!("{queue}.s{draw}-{}-{}.{sig}", slot.round, slot.index)
}

/// A decimal u64 of at most 20 digits, nothing else (no sign, no space).
pub(crate) fn number(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Bytes of the HMAC kept: 128 bits, as forging one place a visitor cannot
/// use for anything but an estimate is worth no more.
pub(crate) const MAC_LEN: usize = 16;

/// The MAC over a place, fed and ready to finalize or verify.
fn fed(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    ticket: u64,
    seen_s: u64,
) -> HmacSha256 {
    let mut m = key.keyed();
    m.update(PLACE_CONTEXT);
    m.update(queue.as_str().as_bytes());
    m.update(b"\0");
    m.update(user.as_str().as_bytes());
    m.update(b"\0");
    m.update(&ticket.to_be_bytes());
    m.update(&seen_s.to_be_bytes());
    m
}

/// The cookie value for `user`'s `ticket` in `queue`, its last Redis
/// request at `seen_ms` (kept to the second).
pub fn mint(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    ticket: u64,
    seen_ms: u64,
) -> String {
    let seen_s = seen_ms / 1_000;
    let sig = URL_SAFE_NO_PAD.encode(
        &fed(key, queue, user, ticket, seen_s)
            .finalize()
            .into_bytes()[..MAC_LEN],
    );
    let (ticket, seen_s) = (ticket.to_string(), seen_s.to_string());
    [queue.as_str(), ".", &ticket, "-", &seen_s, ".", &sig].concat()
}

/// The cookie value for `user`'s `held` place in `queue` ([`mint`] or
/// [`mint_slot`]), and what [`verify`] reads back from it: the same place,
/// its time kept to the second.
pub fn sign(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    held: Held,
) -> (String, Held) {
    match held {
        Held::Ticket { ticket, seen_ms } => (
            mint(key, queue, user, ticket, seen_ms),
            Held::Ticket {
                ticket,
                seen_ms: seen_ms / 1_000 * 1_000,
            },
        ),
        Held::Slot { draw, slot } => (mint_slot(key, queue, user, draw, slot), held),
    }
}

/// What a cookie value holds for `user` in `queue`; `None` for another
/// queue's place, another visitor's, or a forged or malformed one.
pub fn verify(
    key: &(impl MacKey + ?Sized),
    value: &str,
    queue: &QueueId,
    user: &UserId,
) -> Option<Held> {
    let mut parts = value.splitn(3, '.');
    let (q, held, sig) = (parts.next()?, parts.next()?, parts.next()?);
    if q != queue.as_str() {
        return None;
    }
    let held = match held.strip_prefix('s') {
        None => {
            let (ticket, seen) = held.split_once('-')?;
            Held::Ticket {
                ticket: number(ticket)?,
                seen_ms: number(seen)?.checked_mul(1_000)?,
            }
        }
        Some(slot) => {
            let mut n = slot.splitn(3, '-');
            let (draw, round, index) = (number(n.next()?)?, number(n.next()?)?, number(n.next()?)?);
            Held::Slot {
                draw,
                slot: DrawSlot { round, index },
            }
        }
    };
    let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
    if sig.len() != MAC_LEN {
        return None;
    }
    let mac = match held {
        Held::Ticket { ticket, seen_ms } => fed(key, queue, user, ticket, seen_ms / 1_000),
        Held::Slot { draw, slot } => fed_slot(key, queue, user, draw, slot),
    };
    // Constant-time, on the kept bytes.
    mac.verify_truncated_left(&sig).ok()?;
    Some(held)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"test-identity-secret-0123456789abcdef";

    fn q(id: &str) -> QueueId {
        QueueId::new(id).unwrap()
    }

    fn u(id: &str) -> UserId {
        UserId::new(id).unwrap()
    }

    #[test]
    fn a_place_reads_back_for_its_visitor_and_queue_only() {
        let value = mint(KEY, &q("main"), &u("alice"), 412_345, 1_800_000_000_999);
        assert!(value.starts_with("main.412345-1800000000."), "{value}");
        assert_eq!(
            verify(KEY, &value, &q("main"), &u("alice")),
            Some(Held::Ticket {
                ticket: 412_345,
                seen_ms: 1_800_000_000_000
            })
        );
        assert_eq!(verify(KEY, &value, &q("main"), &u("bob")), None, "borrowed");
        assert_eq!(verify(KEY, &value, &q("other"), &u("alice")), None);
        assert_eq!(
            verify(
                b"another-secret-0123456789abcdefghij",
                &value,
                &q("main"),
                &u("alice")
            ),
            None
        );
    }

    #[test]
    fn a_signed_place_verifies_to_what_sign_says_it_holds() {
        let slot = Held::Slot {
            draw: 3,
            slot: DrawSlot { round: 1, index: 7 },
        };
        let ticket = Held::Ticket {
            ticket: 42,
            seen_ms: 1_800_000_000_999,
        };
        for held in [slot, ticket] {
            let (value, reads) = sign(KEY, &q("main"), &u("alice"), held);
            assert_eq!(verify(KEY, &value, &q("main"), &u("alice")), Some(reads));
        }
        let (_, reads) = sign(KEY, &q("main"), &u("alice"), ticket);
        assert_eq!(
            reads,
            Held::Ticket {
                ticket: 42,
                seen_ms: 1_800_000_000_000
            },
            "to the second"
        );
    }

    #[test]
    fn a_forged_or_malformed_place_is_refused() {
        let value = mint(KEY, &q("main"), &u("alice"), 412_345, 1_800_000_000_000);
        let sig = value.rsplit('.').next().unwrap();
        for forged in [
            format!("main.1-1800000000.{sig}"),
            format!("main.412345-1800000001.{sig}"),
            format!("main.412345.{sig}"),
            format!("main.412345-1800000000.{}", &sig[1..]),
            "main.412345-1800000000".to_string(),
            format!("main.-1-1800000000.{sig}"),
            format!("main.+412345-1800000000.{sig}"),
            format!("main.412345-1800000000.{sig}.x"),
            format!("main.{}-1.{sig}", "9".repeat(30)),
            String::new(),
        ] {
            assert_eq!(
                verify(KEY, &forged, &q("main"), &u("alice")),
                None,
                "{forged}"
            );
        }
    }

    #[test]
    fn a_slot_reads_back_for_its_visitor_queue_and_opening_only() {
        let slot = DrawSlot {
            round: 2,
            index: 41,
        };
        let value = mint_slot(KEY, &q("main"), &u("alice"), 3, slot);
        assert!(value.starts_with("main.s3-2-41."), "{value}");
        assert_eq!(
            verify(KEY, &value, &q("main"), &u("alice")),
            Some(Held::Slot { draw: 3, slot })
        );
        assert_eq!(verify(KEY, &value, &q("main"), &u("bob")), None, "borrowed");
        let sig = value.rsplit('.').next().unwrap();
        for forged in [
            format!("main.s3-1-41.{sig}"),
            format!("main.s3-2-0.{sig}"),
            format!("main.s4-2-41.{sig}"),
            format!("main.s3-2-41-1.{sig}"),
            format!("main.s3-2.{sig}"),
            format!("main.s-2-41.{sig}"),
            // A ticket MAC never verifies as a slot, nor the reverse.
            format!("main.3.{sig}"),
        ] {
            assert_eq!(
                verify(KEY, &forged, &q("main"), &u("alice")),
                None,
                "{forged}"
            );
        }
        let ticket = mint(KEY, &q("main"), &u("alice"), 7, 0);
        let tsig = ticket.rsplit('.').next().unwrap();
        assert_eq!(
            verify(KEY, &format!("main.s7-1-0.{tsig}"), &q("main"), &u("alice")),
            None
        );
    }
}
