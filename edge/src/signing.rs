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

/// How far the time a request was signed at may be from the origin's
/// clock: the README's snippets allow a minute.
pub const MAX_SKEW_MS: u64 = 60_000;

/// The gate's headers on a request the origin received.
#[derive(Debug, Clone, Copy, Default)]
pub struct Signed<'a> {
    /// [`USER_HEADER`].
    pub user: &'a str,
    /// [`QUEUE_HEADER`].
    pub queue: &'a str,
    /// [`TIME_HEADER`].
    pub time: &'a str,
    /// [`SIGNATURE_HEADER`].
    pub signature: &'a str,
}

/// Whether `signed` proves the request `method path` passed the gate of
/// `expected_queue`: a user is named, the queue is the one that guards
/// the route, the time is within [`MAX_SKEW_MS`] of `now_ms`, and the
/// signature matches (compared in constant time). The whole check the
/// README's *Origin verification* asks of a shop, in Rust: what the demo
/// shop runs.
pub fn passed(
    secret: &[u8],
    expected_queue: &str,
    signed: &Signed<'_>,
    method: &str,
    path: &str,
    now_ms: u64,
) -> bool {
    let Ok(time) = signed.time.parse::<u64>() else {
        return false;
    };
    let Some(hex_sig) = signed.signature.strip_prefix("v1=") else {
        return false;
    };
    let Ok(sig) = hex::decode(hex_sig) else {
        return false;
    };
    if signed.user.is_empty()
        || signed.queue != expected_queue
        || time.abs_diff(now_ms) >= MAX_SKEW_MS
    {
        return false;
    }
    let mut mac = keyed(secret);
    mac.update(message(signed.queue, signed.user, time, method, path).as_bytes());
    mac.verify_slice(&sig).is_ok()
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
    fn an_origin_accepts_only_a_fresh_signature_for_its_queue() {
        let secret = b"origin-secret-origin-secret-0123";
        let now = 1_764_669_600_123;
        let sig = sign(secret, "main", "u1", now, "POST", "/orders");
        let time = now.to_string();
        let good = Signed {
            user: "u1",
            queue: "main",
            time: &time,
            signature: &sig,
        };
        assert!(passed(secret, "main", &good, "POST", "/orders", now));
        assert!(passed(
            secret,
            "main",
            &good,
            "post",
            "/orders",
            now + 59_999
        ));
        // Another queue's gate, another route, another user, a stale or
        // future time, another secret, a bent signature: refused.
        assert!(!passed(secret, "drop-2", &good, "POST", "/orders", now));
        assert!(!passed(secret, "main", &good, "GET", "/orders", now));
        assert!(!passed(secret, "main", &good, "POST", "/tickets/1", now));
        assert!(!passed(
            secret,
            "main",
            &good,
            "POST",
            "/orders",
            now + 60_000
        ));
        assert!(!passed(
            secret,
            "main",
            &good,
            "POST",
            "/orders",
            now - 60_000
        ));
        assert!(!passed(
            b"another-secret-another-secret-01",
            "main",
            &good,
            "POST",
            "/orders",
            now
        ));
        let other = Signed { user: "u2", ..good };
        assert!(!passed(secret, "main", &other, "POST", "/orders", now));
        let bent = sig.replace("v1=3", "v1=4");
        for signature in [bent.as_str(), "", "v1=", "v1=zz", &sig[3..]] {
            let s = Signed { signature, ..good };
            assert!(
                !passed(secret, "main", &s, "POST", "/orders", now),
                "{signature:?}"
            );
        }
        for time in ["", "soon", "-5"] {
            let s = Signed { time, ..good };
            assert!(
                !passed(secret, "main", &s, "POST", "/orders", now),
                "{time:?}"
            );
        }
        let nobody = sign(secret, "main", "", now, "POST", "/orders");
        let s = Signed {
            user: "",
            signature: &nobody,
            ..good
        };
        assert!(
            !passed(secret, "main", &s, "POST", "/orders", now),
            "no user"
        );
    }

    #[test]
    fn every_header_carries_the_prefix() {
        for h in [USER_HEADER, QUEUE_HEADER, TIME_HEADER, SIGNATURE_HEADER] {
            assert!(h.starts_with(HEADER_PREFIX), "{h}");
        }
    }
}
