//! The place cookie: a visitor's ticket in one queue's line, signed with
//! the identity key and bound to the visitor, so the edge can answer a
//! far-back poll without Redis (docs/uncapped-line.md). It grants nothing:
//! admission, the token and everything after it stay with Redis, and a
//! visitor near the head is always asked there.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;
use queuegate_shared::{QueueId, UserId};

use crate::identity::MacKey;
use crate::mac::HmacSha256;

/// Domain separation for place MACs (the key also signs visitor cookies).
const PLACE_CONTEXT: &[u8] = b"queuegate-place-v1:";

/// Bytes of the HMAC kept: 128 bits, as forging one place a visitor cannot
/// use for anything but an estimate is worth no more.
const MAC_LEN: usize = 16;

/// The MAC over a place, fed and ready to finalize or verify.
fn fed(key: &(impl MacKey + ?Sized), queue: &QueueId, user: &UserId, ticket: u64) -> HmacSha256 {
    let mut m = key.keyed();
    m.update(PLACE_CONTEXT);
    m.update(queue.as_str().as_bytes());
    m.update(b"\0");
    m.update(user.as_str().as_bytes());
    m.update(b"\0");
    m.update(&ticket.to_be_bytes());
    m
}

/// The cookie value for `user`'s `ticket` in `queue`.
pub fn mint(key: &(impl MacKey + ?Sized), queue: &QueueId, user: &UserId, ticket: u64) -> String {
    let sig =
        URL_SAFE_NO_PAD.encode(&fed(key, queue, user, ticket).finalize().into_bytes()[..MAC_LEN]);
    format!("{queue}.{ticket}.{sig}")
}

/// The ticket a cookie value holds for `user` in `queue`; `None` for
/// another queue's place, another visitor's, or a forged or malformed one.
pub fn verify(
    key: &(impl MacKey + ?Sized),
    value: &str,
    queue: &QueueId,
    user: &UserId,
) -> Option<u64> {
    let mut parts = value.splitn(3, '.');
    let (q, ticket, sig) = (parts.next()?, parts.next()?, parts.next()?);
    if q != queue.as_str() || ticket.len() > 20 || !ticket.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ticket: u64 = ticket.parse().ok()?;
    let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
    if sig.len() != MAC_LEN {
        return None;
    }
    // Constant-time, on the kept bytes.
    fed(key, queue, user, ticket)
        .verify_truncated_left(&sig)
        .ok()?;
    Some(ticket)
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
        let value = mint(KEY, &q("main"), &u("alice"), 412_345);
        assert!(value.starts_with("main.412345."), "{value}");
        assert_eq!(verify(KEY, &value, &q("main"), &u("alice")), Some(412_345));
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
    fn a_forged_or_malformed_place_is_refused() {
        let value = mint(KEY, &q("main"), &u("alice"), 412_345);
        let sig = value.rsplit('.').next().unwrap();
        for forged in [
            format!("main.1.{sig}"),
            format!("main.412345.{}", &sig[1..]),
            "main.412345".to_string(),
            format!("main.-1.{sig}"),
            format!("main.+412345.{sig}"),
            format!("main.412345.{sig}.x"),
            format!("main.{}.{sig}", "9".repeat(30)),
            String::new(),
        ] {
            assert_eq!(
                verify(KEY, &forged, &q("main"), &u("alice")),
                None,
                "{forged}"
            );
        }
    }
}
