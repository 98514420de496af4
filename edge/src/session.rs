//! The session pass: what a browse route keeps of a session Redis just
//! confirmed, signed with the identity key and bound to the visitor and
//! the queue, so the session's next pages pass without a Redis call
//! (README, *Browse and spend routes*). It lets pages load, nothing more:
//! the order's token stays with Redis, which `consume` asks every time.
//!
//! `<queue>.<endsAt>-<checkedS>.<mac>`: the session's end (epoch ms) and
//! when Redis last confirmed it (epoch seconds). The edge asks Redis again
//! once that is [`RECHECK_MS`] old — a revocation or a renewal is seen
//! then — and never after the end.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;
use queuegate_shared::{QueueId, UserId};

use crate::identity::MacKey;
use crate::mac::HmacSha256;
use crate::place::{number, MAC_LEN};

/// How long a confirmed session passes pages without asking Redis again:
/// longer than most checkouts, so a visit costs Redis one request however
/// many pages it loads; a revocation stops its pages within this long (its
/// order at once).
pub const RECHECK_MS: u64 = 300_000;

/// Domain separation (the key also signs visitor and place cookies).
const CONTEXT: &[u8] = b"queuegate-session-v1:";

/// A verified session pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionPass {
    /// Epoch ms at which the session ends.
    pub ends_at: u64,
    /// Epoch ms (to the second) at which Redis last confirmed it.
    pub checked_ms: u64,
}

impl SessionPass {
    /// Whether it passes a page at `now_ms` without Redis.
    pub fn passes(&self, now_ms: u64) -> bool {
        now_ms < self.ends_at && now_ms.saturating_sub(self.checked_ms) < RECHECK_MS
    }
}

fn fed(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    ends_at: u64,
    checked_s: u64,
) -> HmacSha256 {
    let mut m = key.keyed();
    m.update(CONTEXT);
    m.update(queue.as_str().as_bytes());
    m.update(b"\0");
    m.update(user.as_str().as_bytes());
    m.update(b"\0");
    m.update(&ends_at.to_be_bytes());
    m.update(&checked_s.to_be_bytes());
    m
}

/// The cookie value for `user`'s session in `queue`, ending at `ends_at`,
/// confirmed by Redis at `checked_ms`.
pub fn mint(
    key: &(impl MacKey + ?Sized),
    queue: &QueueId,
    user: &UserId,
    ends_at: u64,
    checked_ms: u64,
) -> String {
    let checked_s = checked_ms / 1_000;
    let sig = URL_SAFE_NO_PAD.encode(
        &fed(key, queue, user, ends_at, checked_s)
            .finalize()
            .into_bytes()[..MAC_LEN],
    );
    format!("{queue}.{ends_at}-{checked_s}.{sig}")
}

/// The pass a cookie value holds for `user` in `queue`; `None` for another
/// queue's or visitor's, or a forged or malformed one.
pub fn verify(
    key: &(impl MacKey + ?Sized),
    value: &str,
    queue: &QueueId,
    user: &UserId,
) -> Option<SessionPass> {
    let mut parts = value.splitn(3, '.');
    let (q, held, sig) = (parts.next()?, parts.next()?, parts.next()?);
    if q != queue.as_str() {
        return None;
    }
    let (ends, checked) = held.split_once('-')?;
    let (ends_at, checked_s) = (number(ends)?, number(checked)?);
    let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
    if sig.len() != MAC_LEN {
        return None;
    }
    fed(key, queue, user, ends_at, checked_s)
        .verify_truncated_left(&sig)
        .ok()?;
    Some(SessionPass {
        ends_at,
        checked_ms: checked_s.checked_mul(1_000)?,
    })
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
    fn a_pass_reads_back_for_its_visitor_and_queue_only() {
        let value = mint(
            KEY,
            &q("main"),
            &u("alice"),
            1_800_000_600_000,
            1_800_000_000_999,
        );
        assert!(
            value.starts_with("main.1800000600000-1800000000."),
            "{value}"
        );
        let pass = verify(KEY, &value, &q("main"), &u("alice")).expect("ours");
        assert_eq!(
            pass,
            SessionPass {
                ends_at: 1_800_000_600_000,
                checked_ms: 1_800_000_000_000
            }
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
    fn a_forged_or_malformed_pass_is_refused() {
        let value = mint(
            KEY,
            &q("main"),
            &u("alice"),
            1_800_000_600_000,
            1_800_000_000_000,
        );
        let later = value.replacen("1800000600000", "1900000600000", 1);
        assert_eq!(
            verify(KEY, &later, &q("main"), &u("alice")),
            None,
            "a later end"
        );
        for bad in [
            "",
            "main",
            "main.1-2",
            "main.x-2.AAAA",
            "main.1-2.!!",
            "main.-1-2.AAAA",
        ] {
            assert_eq!(verify(KEY, bad, &q("main"), &u("alice")), None, "{bad}");
        }
    }

    #[test]
    fn a_pass_lasts_until_the_end_or_the_recheck() {
        let pass = SessionPass {
            ends_at: 10_000_000,
            checked_ms: 1_000_000,
        };
        assert!(pass.passes(1_000_000));
        assert!(pass.passes(1_000_000 + RECHECK_MS - 1));
        assert!(!pass.passes(1_000_000 + RECHECK_MS), "Redis is asked again");
        let ending = SessionPass {
            ends_at: 1_100_000,
            checked_ms: 1_000_000,
        };
        assert!(!ending.passes(1_100_000), "never after the end");
    }
}
