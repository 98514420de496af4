//! Signed texts this isolate has verified, so a visitor's polls with the
//! same text are not verified again each time: the signed-in visitor's
//! JWT, the anonymous visitor's cookie and the place cookie. A small
//! table per kind that holds each text and compares it whole, each entry
//! trusted until the time it was kept with (a JWT's `exp` with the clock
//! skew [`VerifiedJwt::valid_until_s`] allows) and never later. A text
//! that failed verification is never kept.

use queuegate_edge::identity::VerifiedJwt;
use queuegate_shared::UserId;

/// Ways of a set: a text may sit in any of its set's [`WAYS`] entries.
pub const WAYS: usize = 8;

/// Sets of the table.
pub const SETS: usize = 128;

/// Most texts one table keeps (1,024: about 1 MB with tokens of 1 KB):
/// a visitor polls every few seconds, so this covers the visitors an
/// isolate answers at once; beyond it a text is verified again, never
/// answered wrongly.
pub const CAPACITY: usize = WAYS * SETS;

/// How long a text with no expiry of its own (a place or visitor cookie)
/// is kept from when it was checked or signed: an hour. Entries then
/// expire in the order they came, so a full set gives up its oldest
/// (kept forever, they would all tie and one way would take every
/// newcomer), and a visitor still polling an hour on pays one check.
pub const KEEP_S: f64 = 3_600.0;

/// Bytes at the end of a text that choose its set (see [`set_of`]).
const TAIL: usize = 12;

/// The verified texts and what each verified to, set-associative: a
/// text's set is fixed by its last [`TAIL`] bytes and it takes a free or
/// expired entry of that set, else the one that expires first. A table
/// mapped one entry per text (the first design) made two tokens sharing
/// an entry push each other out on every poll: with 500 visitors, two in
/// five of them. No `HashMap`: it adds kilobytes to the wasm.
#[derive(Debug)]
pub struct Verified<V> {
    slots: Vec<Option<Entry<V>>>,
}

/// The JWTs verified, and the user each names.
pub type VerifiedTokens = Verified<UserId>;

impl<V> Default for Verified<V> {
    fn default() -> Self {
        Verified { slots: Vec::new() }
    }
}

#[derive(Debug)]
struct Entry<V> {
    text: Box<str>,
    value: V,
    valid_until_s: f64,
}

impl<V: Clone> Verified<V> {
    /// What `text` verified to if it was verified here and still holds at
    /// `now_s` (Unix seconds); an entry past its time is dropped.
    pub fn get(&mut self, text: &str, now_s: f64) -> Option<V> {
        let set = self.slots.get_mut(set_of(text))?;
        let slot = set
            .iter_mut()
            .find(|slot| slot.as_ref().is_some_and(|e| &*e.text == text))?;
        let entry = slot.as_ref()?;
        if now_s < entry.valid_until_s {
            return Some(entry.value.clone());
        }
        *slot = None;
        None
    }

    /// Keeps `text` as verified to `value` until `valid_until_s`:
    /// its own entry, else a free one of its set, else the one that
    /// expires first.
    pub fn keep(&mut self, text: &str, value: V, valid_until_s: f64) {
        if self.slots.is_empty() {
            self.slots.resize_with(CAPACITY, || None);
        }
        let Some(set) = self.slots.get_mut(set_of(text)) else {
            return;
        };
        let way = set
            .iter()
            .position(|s| s.as_ref().is_some_and(|e| &*e.text == text))
            .or_else(|| set.iter().position(Option::is_none))
            .or_else(|| {
                (0..set.len()).min_by(|&a, &b| {
                    let until = |i: usize| set[i].as_ref().map_or(0.0, |e| e.valid_until_s);
                    until(a).total_cmp(&until(b))
                })
            });
        if let Some(way) = way {
            set[way] = Some(Entry {
                text: text.into(),
                value,
                valid_until_s,
            });
        }
    }

    /// Texts held.
    pub fn len(&self) -> usize {
        self.slots.iter().flatten().count()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Verified<UserId> {
    /// Passes a JWT's verification on, keeping it for `token` only when it
    /// verified: a failure is answered and forgotten.
    pub fn remember<E>(
        &mut self,
        token: &str,
        verified: Result<VerifiedJwt, E>,
    ) -> Result<UserId, E> {
        let verified = verified?;
        self.keep(token, verified.user.clone(), verified.valid_until_s);
        Ok(verified.user)
    }
}

/// The range of `slots` that is `text`'s set, from its last [`TAIL`]
/// bytes. Every text kept ends in a signature or a MAC (a JWT's third
/// part, a cookie's `.<mac>`), which nobody without the key chooses, so
/// its tail spreads texts over the sets as well as a hash of the whole
/// text would, for a fraction of the work (the whole token was 2 % of a
/// far-back poll's CPU). A text with a common tail only shares a set:
/// the whole text is compared, so a collision costs a verification.
fn set_of(text: &str) -> std::ops::Range<usize> {
    let bytes = text.as_bytes();
    let tail = &bytes[bytes.len().saturating_sub(TAIL)..];
    let hash = tail.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
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
    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

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
        // Real tokens: their sets come from their signatures' tails.
        let mut known = VerifiedTokens::default();
        let tokens: Vec<String> = (0..500)
            .map(|i| {
                let claims = serde_json::json!({"sub": format!("u-{i}"), "exp": NOW + 600.0});
                queuegate_edge::identity::sign_jwt(KEY, &claims)
            })
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
    fn place_cookies_of_one_line_spread_over_the_sets() {
        // Place cookies share everything but the ticket, the second and
        // the MAC: the MAC's tail alone must spread them.
        use queuegate_edge::place;
        use queuegate_shared::{QueueId, UserId};
        let queue = QueueId::new("main").unwrap();
        let mut known: Verified<u64> = Verified::default();
        let values: Vec<String> = (0..CAPACITY as u64)
            .map(|t| {
                let user = UserId::new(&format!("visitor-{t}")).unwrap();
                place::mint(KEY, &queue, &user, 10_000 + t, 1_800_000_000_000)
            })
            .collect();
        for (t, v) in values.iter().enumerate() {
            known.keep(v, t as u64, f64::INFINITY);
        }
        // As many as the table holds, each set with its share: a set
        // fuller than WAYS would have pushed others out.
        let kept = values
            .iter()
            .filter(|v| known.get(v, NOW).is_some())
            .count();
        assert!(kept * 10 >= CAPACITY * 8, "only {kept} of {CAPACITY} kept");
        for (t, v) in values.iter().enumerate() {
            if let Some(held) = known.get(v, NOW) {
                assert_eq!(held, t as u64, "the text's own value");
            }
        }
    }

    /// `n` texts that fall in one set (found by trying).
    fn of_one_set(n: usize) -> Vec<String> {
        let set = set_of("anchor");
        (0..)
            .map(|i| format!("t{i}"))
            .filter(|t| set_of(t) == set)
            .take(n)
            .collect()
    }

    #[test]
    fn texts_kept_for_an_hour_give_way_oldest_first() {
        // Cookies have no expiry of their own: kept for KEEP_S from when
        // they came, a full set gives up the one that came first.
        let mut known: Verified<u32> = Verified::default();
        let same = of_one_set(WAYS + 2);
        for (i, t) in same.iter().enumerate() {
            let at = NOW + i as f64;
            known.keep(t, i as u32, at + KEEP_S);
        }
        let now = NOW + same.len() as f64;
        assert_eq!(known.get(&same[0], now), None, "the first went");
        assert_eq!(known.get(&same[1], now), None, "then the second");
        for (i, t) in same.iter().enumerate().skip(2) {
            assert_eq!(known.get(t, now), Some(i as u32), "{t} was kept");
        }
        // An hour after it came, a text is checked again.
        let last = same.last().unwrap();
        assert_eq!(known.get(last, now + KEEP_S), None);
    }

    #[test]
    fn a_full_set_gives_up_its_expired_or_soonest_expiring_entry() {
        let mut known = VerifiedTokens::default();
        let same = of_one_set(WAYS + 1);
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
