//! Headers that tell the origin a request passed the gate: the user id, the
//! queue, a time and an HMAC over them and the request line, so the origin
//! can verify them with the shared secret (see README "Origin verification").

use hmac::Mac;

use crate::mac::keyed;

/// Prefix of every header the edge sets for the origin; the worker strips
/// client-sent ones so they cannot be forged.
pub const HEADER_PREFIX: &str = "x-queuegate-";
/// The verified user id.
pub const USER_HEADER: &str = "x-queuegate-user";
/// The queue the user was admitted from.
pub const QUEUE_HEADER: &str = "x-queuegate-queue";
/// Epoch ms when the worker forwarded the request.
pub const TIME_HEADER: &str = "x-queuegate-time";
/// `v1=<hex HMAC-SHA256>` over the fields above.
pub const SIGNATURE_HEADER: &str = "x-queuegate-signature";

/// The signed message: one field a line, in a fixed order.
pub fn message(queue: &str, user: &str, time_ms: u64, method: &str, path: &str) -> String {
    format!(
        "v1\n{queue}\n{user}\n{time_ms}\n{}\n{path}",
        method.to_ascii_uppercase()
    )
}

/// `v1=<hex>` for the signature header.
pub fn sign(
    secret: &[u8],
    queue: &str,
    user: &str,
    time_ms: u64,
    method: &str,
    path: &str,
) -> String {
    let mut mac = keyed(secret);
    mac.update(message(queue, user, time_ms, method, path).as_bytes());
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// A key for another purpose derived from a secret (HMAC-SHA256 of the
/// label), so one configured secret can serve without the uses mixing.
pub fn derive_key(secret: &[u8], label: &str) -> Vec<u8> {
    let mut mac = keyed(secret);
    mac.update(label.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_a_known_vector() {
        // Same inputs as the README's verification example.
        let sig = sign(
            b"origin-secret-origin-secret-0123",
            "main",
            "u1",
            1_764_669_600_123,
            "post",
            "/orders",
        );
        // Checked independently with Python's hmac/hashlib; the README
        // prints the same inputs and hex for origin implementers.
        assert_eq!(
            sig,
            "v1=32c84c9cc5726a8bcad043002cc93543b4ac2d622f7e024f74bcd4aaa81b2cea"
        );
        let again = sign(
            b"origin-secret-origin-secret-0123",
            "main",
            "u1",
            1_764_669_600_123,
            "POST",
            "/orders",
        );
        assert_eq!(sig, again);
        let other = sign(
            b"origin-secret-origin-secret-0123",
            "main",
            "u2",
            1_764_669_600_123,
            "POST",
            "/orders",
        );
        assert_ne!(sig, other);
        assert_eq!(message("q", "u", 5, "post", "/o"), "v1\nq\nu\n5\nPOST\n/o");
    }

    #[test]
    fn every_header_carries_the_prefix() {
        for h in [USER_HEADER, QUEUE_HEADER, TIME_HEADER, SIGNATURE_HEADER] {
            assert!(h.starts_with(HEADER_PREFIX), "{h}");
        }
    }
}
