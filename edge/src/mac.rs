//! HMAC-SHA-256 keyed in one place: the visitor cookies and JWTs, the origin
//! signature, derived keys and ALTCHA challenges all start from it.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// HMAC-SHA-256.
pub type HmacSha256 = Hmac<Sha256>;

/// HMAC-SHA-256 keyed with `secret`.
pub fn keyed(secret: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length (a long one is hashed first); this
    // cannot fail.
    #[allow(clippy::expect_used)]
    HmacSha256::new_from_slice(secret).expect("HMAC takes any key length")
}
