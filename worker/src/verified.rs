//! Login tokens this isolate has verified, so a signed-in visitor's polls
//! with the same JWT are not verified again each time: a small table keyed
//! by the token's SHA-256, each entry trusted until the token's `exp` (with
//! the clock skew [`VerifiedJwt::valid_until_s`] allows) and never later.
//! A token that failed verification is never kept.

use queuegate_edge::identity::VerifiedJwt;
use queuegate_shared::UserId;
use sha2::{Digest, Sha256};

/// Most tokens one isolate keeps (about 100 KB): a visitor polls every few
/// seconds, so this covers the visitors an isolate answers at once; beyond
/// it a token is verified again, never answered wrongly.
pub const CAPACITY: usize = 1024;

/// The verified tokens, direct-mapped by digest: a token's slot is fixed by
/// its digest and a newcomer replaces whoever held it, so the table never
/// grows past [`CAPACITY`] and needs no hasher (a `HashMap` adds kilobytes
/// to the wasm).
#[derive(Debug, Default)]
pub struct VerifiedTokens {
    slots: Vec<Option<Entry>>,
}

#[derive(Debug)]
struct Entry {
    digest: [u8; 32],
    user: UserId,
    valid_until_s: f64,
}

impl VerifiedTokens {
    /// The user of `token` if it was verified here and its claims still
    /// hold at `now_s` (Unix seconds); an entry past them is dropped.
    pub fn get(&mut self, token: &str, now_s: f64) -> Option<UserId> {
        let digest = digest(token);
        let slot = self.slots.get_mut(index(&digest))?;
        let entry = slot.as_ref().filter(|e| e.digest == digest)?;
        if now_s < entry.valid_until_s {
            return Some(entry.user.clone());
        }
        *slot = None;
        None
    }

    /// Passes a verification's answer on, keeping it for `token` only when
    /// it verified: a failure is answered and forgotten.
    pub fn remember<E>(
        &mut self,
        token: &str,
        verified: Result<VerifiedJwt, E>,
    ) -> Result<UserId, E> {
        let verified = verified?;
        if self.slots.is_empty() {
            self.slots.resize_with(CAPACITY, || None);
        }
        let digest = digest(token);
        if let Some(slot) = self.slots.get_mut(index(&digest)) {
            *slot = Some(Entry {
                digest,
                user: verified.user.clone(),
                valid_until_s: verified.valid_until_s,
            });
        }
        Ok(verified.user)
    }

    /// Tokens held.
    pub fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A digest's slot: its first bytes, uniform as all of SHA-256's.
fn index(digest: &[u8; 32]) -> usize {
    usize::from(u16::from_le_bytes([digest[0], digest[1]])) % CAPACITY
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: f64 = 1_800_000_000.0;

    fn verified(user: &str, valid_until_s: f64) -> Result<VerifiedJwt, &'static str> {
        Ok(VerifiedJwt {
            user: UserId::new(user).unwrap(),
            valid_until_s,
        })
    }

    #[test]
    fn a_verified_token_is_known_until_its_exp_and_never_after() {
        let mut known = VerifiedTokens::default();
        assert_eq!(known.get("t1", NOW), None);
        let user = known.remember("t1", verified("u1", NOW + 60.0)).unwrap();
        assert_eq!(user.as_str(), "u1");
        assert_eq!(known.get("t1", NOW).unwrap().as_str(), "u1");
        assert_eq!(known.get("t1", NOW + 59.9).unwrap().as_str(), "u1");
        assert_eq!(known.get("t1", NOW + 60.0), None, "expired: gone");
        assert_eq!(known.get("t1", NOW), None, "and not back");
        assert!(known.is_empty());
    }

    #[test]
    fn another_token_string_is_verified_anew() {
        let mut known = VerifiedTokens::default();
        known.remember("t1", verified("u1", NOW + 60.0)).unwrap();
        assert_eq!(known.get("t2", NOW), None);
        assert_eq!(known.get("t1 ", NOW), None);
        assert_eq!(known.get("T1", NOW), None);
    }

    #[test]
    fn a_failed_verification_is_never_kept() {
        let mut known = VerifiedTokens::default();
        let failed: Result<VerifiedJwt, &str> = Err("bad signature");
        assert_eq!(known.remember("t1", failed), Err("bad signature"));
        assert_eq!(known.get("t1", NOW), None);
        // A failure does not evict or replace a good answer either.
        known.remember("t2", verified("u2", NOW + 60.0)).unwrap();
        assert_eq!(known.remember("t2", Err("expired")), Err("expired"));
        assert_eq!(known.get("t2", NOW).unwrap().as_str(), "u2");
    }

    #[test]
    fn the_table_stays_within_its_bound() {
        let mut known = VerifiedTokens::default();
        let n = 5 * CAPACITY;
        for i in 0..n {
            let token = format!("token-{i}");
            known.remember(&token, verified("u", NOW + 60.0)).unwrap();
            assert_eq!(known.get(&token, NOW).unwrap().as_str(), "u", "just kept");
        }
        assert!(known.len() <= CAPACITY, "{}", known.len());
        assert_eq!(known.slots.len(), CAPACITY);
        let still = (0..n)
            .filter(|i| known.get(&format!("token-{i}"), NOW).is_some())
            .count();
        assert_eq!(still, known.len(), "the rest were replaced, not kept");
    }
}
