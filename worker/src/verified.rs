//! Login tokens this isolate has verified, so a signed-in visitor's polls
//! with the same JWT are not verified again each time: a small table that
//! holds each token's text and compares it whole, each entry trusted until
//! the token's `exp` (with the clock skew [`VerifiedJwt::valid_until_s`]
//! allows) and never later. A token that failed verification is never
//! kept.

use queuegate_edge::identity::VerifiedJwt;
use queuegate_shared::UserId;

/// Ways of a set: a token may sit in any of its set's [`WAYS`] entries.
pub const WAYS: usize = 8;

/// Sets of the table.
pub const SETS: usize = 128;

/// Most tokens one isolate keeps (1,024: about 1 MB with tokens of 1 KB):
/// a visitor polls every few seconds, so this covers the visitors an
/// isolate answers at once; beyond it a token is verified again, never
/// answered wrongly.
pub const CAPACITY: usize = WAYS * SETS;

/// The verified tokens, set-associative: a token's set is fixed by a hash
/// of its text and it takes a free or expired entry of that set, else the
/// one that expires first. A table mapped one entry per token (the last
/// design) made two tokens sharing an entry push each other out on every
/// poll: with 500 visitors, two in five of them. The hash (FNV-1a) is no
/// secret and needs none: the whole token is compared, so a collision
/// only costs a verification. No `HashMap`: it adds kilobytes to the wasm.
#[derive(Debug, Default)]
pub struct VerifiedTokens {
    slots: Vec<Option<Entry>>,
}

#[derive(Debug)]
struct Entry {
    token: Box<str>,
    user: UserId,
    valid_until_s: f64,
}

impl VerifiedTokens {
    /// The user of `token` if it was verified here and its claims still
    /// hold at `now_s` (Unix seconds); an entry past them is dropped.
    pub fn get(&mut self, token: &str, now_s: f64) -> Option<UserId> {
        let set = self.slots.get_mut(set_of(token))?;
        let slot = set
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|e| &*e.token == token))?;
        let entry = slot.as_ref()?;
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
        let entry = Entry {
            token: token.into(),
            user: verified.user.clone(),
            valid_until_s: verified.valid_until_s,
        };
        if let Some(set) = self.slots.get_mut(set_of(token)) {
            // The token's own entry, else a free one, else the one that
            // expires first.
            let way = set
                .iter()
                .position(|s| s.as_ref().is_some_and(|e| &*e.token == token))
                .or_else(|| set.iter().position(Option::is_none))
                .or_else(|| {
                    (0..set.len()).min_by(|&a, &b| {
                        let until = |i: usize| set[i].as_ref().map_or(0.0, |e| e.valid_until_s);
                        until(a).total_cmp(&until(b))
                    })
                });
            if let Some(way) = way {
                set[way] = Some(entry);
            }
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

/// The range of `slots` that is `token`'s set.
fn set_of(token: &str) -> std::ops::Range<usize> {
    let hash = token.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    // FNV-1a leaves its last bytes out of some bits (bits 32-39 never see
    // the last one): MurmurHash3's finalizer spreads every bit over all.
    let mut h = hash;
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    let set = (h % SETS as u64) as usize;
    set * WAYS..(set + 1) * WAYS
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

    #[test]
    fn the_visitors_an_isolate_answers_at_once_all_stay_known() {
        // The bench's line: 500 signed-in visitors polling in turn. One
        // entry per token kept two in five of them verifying every poll.
        let mut known = VerifiedTokens::default();
        let tokens: Vec<String> = (0..500)
            .map(|i| format!("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ1LXtpfSJ9.sig-{i:04}"))
            .collect();
        for t in &tokens {
            known.remember(t, verified("u", NOW + 600.0)).unwrap();
        }
        for _ in 0..3 {
            for t in &tokens {
                let _ = known.get(t, NOW).map(|_| ()).or_else(|| {
                    known
                        .remember(t, verified("u", NOW + 600.0))
                        .ok()
                        .map(|_| ())
                });
            }
        }
        let kept = tokens
            .iter()
            .filter(|t| known.get(t, NOW).is_some())
            .count();
        assert!(kept >= 495, "only {kept} of 500 stayed known");
    }

    #[test]
    fn a_full_set_gives_up_its_expired_or_soonest_expiring_entry() {
        let mut known = VerifiedTokens::default();
        // Tokens of one set, found by their hash.
        let set = set_of("anchor");
        let same: Vec<String> = (0..)
            .map(|i| format!("t{i}"))
            .filter(|t| set_of(t) == set)
            .take(WAYS + 1)
            .collect();
        for (i, t) in same.iter().take(WAYS).enumerate() {
            known
                .remember(t, verified("u", NOW + 100.0 + i as f64))
                .unwrap();
        }
        // The set is full: the newcomer takes the entry expiring first.
        known
            .remember(&same[WAYS], verified("u", NOW + 500.0))
            .unwrap();
        assert_eq!(known.get(&same[0], NOW), None, "the soonest to expire went");
        for t in &same[1..] {
            assert!(known.get(t, NOW).is_some(), "{t} was kept");
        }
    }
}
