//! The classic ALTCHA proof of work (SHA-256), so its widget and server
//! libraries interoperate: `challenge = hex(SHA-256(salt + number))`,
//! `signature = hex(HMAC-SHA256(secret, challenge))`, and the salt carries
//! `expires` (unix seconds), our `queue` and the difficulty `level` it was
//! issued at as URL parameters. The salt is hashed into the signed
//! challenge, so none of them can be edited. Checking a solution needs no
//! Redis; its single use, and its level against the one in force, are the
//! `enter` script's job.

use base64::Engine;
use hmac::Mac;
use queuegate_shared::QueueId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use queuegate_shared::guard::Verified;
use queuegate_shared::guard::MAX_LEVEL;

use crate::mac::keyed;

/// Header carrying the solution (base64 JSON of a [`Solution`]); the
/// `altcha` field of a form or JSON body also works.
pub const HEADER: &str = "x-altcha";

/// The only algorithm we issue and accept.
pub const ALGORITHM: &str = "SHA-256";

/// A challenge as `GET /queue/challenge` returns it (ALTCHA's JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Challenge {
    /// Always `SHA-256`.
    pub algorithm: String,
    /// Hex SHA-256 of `salt` followed by the secret number.
    pub challenge: String,
    /// The number lies in `0..=maxnumber`.
    pub maxnumber: u64,
    /// Random hex, then `?expires=<unix s>&queue=<id>&level=<0..=2>&`.
    pub salt: String,
    /// Hex HMAC-SHA256 of `challenge` with the edge's secret.
    pub signature: String,
}

/// The solution a client sends back (base64 JSON in `X-Altcha`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Solution {
    /// Must be `SHA-256`.
    pub algorithm: String,
    /// The challenge solved.
    pub challenge: String,
    /// The number found.
    pub number: u64,
    /// The challenge's salt.
    pub salt: String,
    /// The challenge's signature.
    pub signature: String,
}

/// Why a solution was refused. None of these touches Redis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AltchaError {
    /// Not base64 of the ALTCHA JSON.
    #[error("the solution is not base64 JSON of an ALTCHA payload")]
    Malformed,
    /// Another algorithm than SHA-256.
    #[error("only SHA-256 challenges are accepted")]
    Algorithm,
    /// The challenge was not signed by us (forged or altered).
    #[error("the challenge was not issued here")]
    Signature,
    /// The number does not solve the challenge.
    #[error("the number does not solve the challenge")]
    Wrong,
    /// Past the salt's `expires`.
    #[error("the challenge has expired; fetch a new one")]
    Expired,
    /// Issued for another queue (or without one).
    #[error("the challenge was issued for another queue")]
    OtherQueue,
    /// The salt names no difficulty level we issue (a challenge from
    /// before levels existed).
    #[error("the challenge carries no difficulty level; fetch a new one")]
    Level,
}

fn sha256_hex(salt: &str, number: u64) -> String {
    let mut h = Sha256::new();
    h.update(salt.as_bytes());
    h.update(number.to_string().as_bytes());
    hex::encode(h.finalize())
}

/// The terms of a new challenge: its difficulty and when it expires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issue {
    /// The difficulty level in force (`queuegate_shared::guard::challenge_level`).
    pub level: u8,
    /// ALTCHA `maxnumber` of that level.
    pub max_number: u64,
    /// Epoch ms after which a solution is worthless.
    pub expires_at_ms: u64,
}

/// A new challenge for `queue`. `random` makes the salt unique, `number`
/// (in `0..=max_number`, from a CSPRNG) is the secret the client must find.
pub fn create(
    secret: &[u8],
    queue: &QueueId,
    issue: Issue,
    random: [u8; 12],
    number: u64,
) -> Challenge {
    let Issue {
        level,
        max_number,
        expires_at_ms,
    } = issue;
    let salt = format!(
        "{}?expires={}&queue={}&level={}&",
        hex::encode(random),
        expires_at_ms / 1000,
        queue.as_str(),
        level.min(MAX_LEVEL)
    );
    let challenge = sha256_hex(&salt, number % (max_number + 1));
    let mut m = keyed(secret);
    m.update(challenge.as_bytes());
    Challenge {
        algorithm: ALGORITHM.into(),
        signature: hex::encode(m.finalize().into_bytes()),
        challenge,
        maxnumber: max_number,
        salt,
    }
}

/// Checks a base64 JSON solution for `queue` at `now_ms`.
pub fn verify(
    secret: &[u8],
    payload: &str,
    queue: &QueueId,
    now_ms: u64,
) -> Result<Verified, AltchaError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(payload.trim())
        .map_err(|_| AltchaError::Malformed)?;
    let s: Solution = crate::json_of(&bytes).ok_or(AltchaError::Malformed)?;
    if s.algorithm != ALGORITHM {
        return Err(AltchaError::Algorithm);
    }
    let signature = hex::decode(&s.signature).map_err(|_| AltchaError::Signature)?;
    let mut m = keyed(secret);
    m.update(s.challenge.as_bytes());
    m.verify_slice(&signature)
        .map_err(|_| AltchaError::Signature)?;
    if sha256_hex(&s.salt, s.number) != s.challenge {
        return Err(AltchaError::Wrong);
    }
    let param = |name: &str| {
        let query = s.salt.split_once('?')?.1;
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
    };
    // Both are inside the hashed salt, so the signature covers them.
    if param("queue") != Some(queue.as_str()) {
        return Err(AltchaError::OtherQueue);
    }
    let expires_at_ms = param("expires")
        .and_then(|e| e.parse::<u64>().ok())
        .ok_or(AltchaError::Expired)?
        .saturating_mul(1000);
    if now_ms >= expires_at_ms {
        return Err(AltchaError::Expired);
    }
    let level = param("level")
        .and_then(|l| l.parse::<u8>().ok())
        .filter(|l| *l <= MAX_LEVEL)
        .ok_or(AltchaError::Level)?;
    Ok(Verified {
        challenge: s.challenge,
        expires_at_ms,
        level,
    })
}

/// Finds the number as a client would (the tools' crowd, tests and the
/// benchmark use it): tries `0..=maxnumber` in order.
pub fn solve(c: &Challenge) -> Option<u64> {
    let mut prefix = Sha256::new();
    prefix.update(c.salt.as_bytes());
    let want = hex::decode(&c.challenge).ok()?;
    (0..=c.maxnumber).find(|n| {
        let mut h = prefix.clone();
        h.update(n.to_string().as_bytes());
        h.finalize().as_slice() == want.as_slice()
    })
}

/// The `X-Altcha` value for a solved challenge.
pub fn payload(c: &Challenge, number: u64) -> String {
    let s = Solution {
        algorithm: c.algorithm.clone(),
        challenge: c.challenge.clone(),
        number,
        salt: c.salt.clone(),
        signature: c.signature.clone(),
    };
    let json = serde_json::to_vec(&s).unwrap_or_default();
    base64::engine::general_purpose::STANDARD.encode(json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"challenge-secret-challenge-secret";
    const NOW: u64 = 1_764_669_600_000;

    fn queue(id: &str) -> QueueId {
        QueueId::new(id).unwrap()
    }

    fn issue(level: u8) -> Issue {
        Issue {
            level,
            max_number: 5_000,
            expires_at_ms: NOW + 60_000,
        }
    }

    fn challenge(number: u64) -> Challenge {
        create(SECRET, &queue("main"), issue(0), [7; 12], number)
    }

    #[test]
    fn a_solved_challenge_verifies_once_solved() {
        let c = challenge(1234);
        assert!(c.salt.ends_with("&queue=main&level=0&"), "{}", c.salt);
        let n = solve(&c).unwrap();
        assert_eq!(n, 1234);
        let v = verify(SECRET, &payload(&c, n), &queue("main"), NOW).unwrap();
        assert_eq!(v.challenge, c.challenge);
        assert_eq!(v.expires_at_ms, (NOW + 60_000) / 1000 * 1000);
        assert_eq!(v.level, 0);
    }

    /// The level is signed with the rest of the salt: a solver cannot
    /// raise a cheap challenge's level (nor drop it), and a salt without
    /// one is refused.
    #[test]
    fn a_challenge_carries_its_level_signed() {
        let main = queue("main");
        for level in 0..=MAX_LEVEL {
            let c = create(SECRET, &main, issue(level), [9; 12], 77);
            assert!(c.salt.contains(&format!("&level={level}&")), "{}", c.salt);
            let v = verify(SECRET, &payload(&c, 77), &main, NOW).unwrap();
            assert_eq!(v.level, level);
        }
        // Out of range is issued at the highest level, never above it.
        let c = create(SECRET, &main, issue(7), [9; 12], 77);
        assert_eq!(
            verify(SECRET, &payload(&c, 77), &main, NOW).unwrap().level,
            MAX_LEVEL
        );

        // Edited levels: the salt no longer hashes to the signed challenge,
        // and a re-hashed challenge no longer matches the signature.
        let cheap = create(SECRET, &main, issue(0), [9; 12], 77);
        for edit in ["&level=2&", "&level=1&", "&level=0&level=2&", "&"] {
            let mut forged = cheap.clone();
            forged.salt = forged.salt.replace("&level=0&", edit);
            assert_eq!(
                verify(SECRET, &payload(&forged, 77), &main, NOW),
                Err(AltchaError::Wrong),
                "{edit}"
            );
            forged.challenge = sha256_hex(&forged.salt, 77);
            assert_eq!(
                verify(SECRET, &payload(&forged, 77), &main, NOW),
                Err(AltchaError::Signature),
                "{edit}"
            );
        }

        // Signed by us but without a level we issue (from before levels, or
        // garbage): refused, never read as level 0.
        for salt in [
            "ab?expires=9999999999&queue=main&",
            "ab?expires=9999999999&queue=main&level=3&",
            "ab?expires=9999999999&queue=main&level=x&",
        ] {
            let challenge = sha256_hex(salt, 5);
            let mut m = keyed(SECRET);
            m.update(challenge.as_bytes());
            let old = Challenge {
                algorithm: ALGORITHM.into(),
                signature: hex::encode(m.finalize().into_bytes()),
                challenge,
                maxnumber: 10,
                salt: salt.into(),
            };
            assert_eq!(
                verify(SECRET, &payload(&old, 5), &main, NOW),
                Err(AltchaError::Level),
                "{salt}"
            );
        }
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let c = challenge(42);
        let main = queue("main");
        assert_eq!(
            verify(SECRET, &payload(&c, 43), &main, NOW),
            Err(AltchaError::Wrong)
        );
        assert_eq!(
            verify(
                b"another-secret-another-secret-000",
                &payload(&c, 42),
                &main,
                NOW
            ),
            Err(AltchaError::Signature)
        );
        assert_eq!(
            verify(SECRET, &payload(&c, 42), &main, NOW + 61_000),
            Err(AltchaError::Expired)
        );
        assert_eq!(
            verify(SECRET, &payload(&c, 42), &queue("other"), NOW),
            Err(AltchaError::OtherQueue)
        );
        assert_eq!(
            verify(SECRET, "not base64!", &main, NOW),
            Err(AltchaError::Malformed)
        );
        // A salt rewritten to extend the expiry no longer matches the hash.
        let mut forged = c.clone();
        forged.salt = forged.salt.replace("expires=", "expires=9");
        assert_eq!(
            verify(SECRET, &payload(&forged, 42), &main, NOW),
            Err(AltchaError::Wrong)
        );
        let mut sha1 = c;
        sha1.algorithm = "SHA-1".into();
        assert_eq!(
            verify(SECRET, &payload(&sha1, 42), &main, NOW),
            Err(AltchaError::Algorithm)
        );
    }

    /// The challenge matches ALTCHA's construction, checked by hand.
    #[test]
    fn the_construction_is_altchas() {
        let c = challenge(3);
        assert_eq!(c.challenge, sha256_hex(&c.salt, 3));
        let mut m = keyed(SECRET);
        m.update(c.challenge.as_bytes());
        assert_eq!(c.signature, hex::encode(m.finalize().into_bytes()));
        let json = serde_json::to_value(&c).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["algorithm", "challenge", "maxnumber", "salt", "signature"]
        );
    }
}
