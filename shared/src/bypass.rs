//! Bypass links for staff and QA: a link carries a random key
//! (`qgb_` + 64 hex digits); Redis keeps only its SHA-256, under an id (its
//! first 12 hex digits) that lists and revocations name. The edge checks a
//! presented key against Redis on every use, so a revocation holds from
//! the next request, and counts each use (docs/scheduler.md, *Bypass
//! links*).

use sha2::{Digest, Sha256};

/// What every key starts with.
pub const KEY_PREFIX: &str = "qgb_";
/// Live (unexpired, unrevoked) links a queue may have at once.
pub const MAX_LIVE: u64 = 200;
/// The shortest and longest a link may live.
pub const TTL_MS: std::ops::RangeInclusive<u64> = 60_000..=7 * 86_400_000;
/// The longest name.
pub const MAX_NAME: usize = 64;

/// A presented key, checked for shape: its id and SHA-256 (hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyParts {
    /// The first 12 hex digits of the hash: what lists show.
    pub id: String,
    /// The key's SHA-256, lowercase hex.
    pub sha: String,
}

/// A new key from 32 random bytes.
pub fn mint(random: [u8; 32]) -> String {
    format!("{KEY_PREFIX}{}", hex::encode(random))
}

/// The id and hash of `key`, or None when it is not a key's shape (no
/// Redis call is worth making for it).
pub fn parts(key: &str) -> Option<KeyParts> {
    let hex_part = key.strip_prefix(KEY_PREFIX)?;
    if hex_part.len() != 64
        || !hex_part
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let sha = hex::encode(Sha256::digest(key.as_bytes()));
    Some(KeyParts {
        id: sha[..12].to_string(),
        sha,
    })
}

/// Whether `id` is an id's shape (12 lowercase hex digits).
pub fn is_id(id: &str) -> bool {
    id.len() == 12
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why a name cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Empty, or over [`MAX_NAME`] characters.
    #[error("a name is 1-64 characters")]
    Length,
    /// A character other than ASCII letters, digits, space and `_ . @ -`.
    #[error("a name holds ASCII letters, digits, spaces and _ . @ - only")]
    Character,
}

/// `name` trimmed, if it is a usable name (who the link is for, shown in
/// lists and the audit log): ASCII letters, digits, spaces and `_ . @ -`,
/// at most [`MAX_NAME`] characters as given.
pub fn check_name(name: &str) -> Result<&str, NameError> {
    if name.len() > MAX_NAME {
        return Err(NameError::Length);
    }
    let name = name.trim_matches(' ');
    if name.is_empty() {
        return Err(NameError::Length);
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || " _.@-".contains(c))
    {
        return Err(NameError::Character);
    }
    Ok(name)
}

/// One link as Redis keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Link {
    /// Its id.
    pub id: String,
    /// Who it is for.
    pub name: String,
    /// Created (epoch ms).
    pub created_ms: u64,
    /// Expires (epoch ms).
    pub expires_ms: u64,
    /// Revoked by an operator.
    pub revoked: bool,
    /// Requests it passed.
    pub uses: u64,
    /// Its last use (epoch ms), if any.
    pub last_used_ms: Option<u64>,
}

impl Link {
    /// Reads a record (`sha|expires|revoked|uses|last|created|name`).
    pub fn parse(id: &str, record: &str) -> Option<Link> {
        let f: Vec<&str> = record.splitn(7, crate::fields::SEPARATOR).collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
        Some(Link {
            id: id.to_string(),
            expires_ms: num(1)?,
            revoked: *f.get(2)? == "1",
            uses: num(3)?,
            last_used_ms: num(4).filter(|&t| t > 0),
            created_ms: num(5)?,
            name: f.get(6)?.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_one_shape_and_an_id_from_their_hash() {
        let key = mint([7; 32]);
        assert!(key.starts_with("qgb_") && key.len() == 68);
        let p = parts(&key).unwrap();
        assert_eq!(p.sha.len(), 64);
        assert_eq!(p.id, p.sha[..12]);
        assert!(is_id(&p.id));
        for bad in [
            "",
            "qgb_",
            "qgb_xyz",
            &key[..67],
            &format!("{key}0"),
            &key.to_uppercase(),
            &key.replace("qgb_", "qga_"),
        ] {
            assert_eq!(parts(bad), None, "{bad}");
        }
        assert!(!is_id("ABCDEF012345") && !is_id("abc"));
    }

    #[test]
    fn names_are_short_plain_text() {
        assert_eq!(check_name("  qa alice@shop "), Ok("qa alice@shop"));
        assert_eq!(check_name("스태프-1"), Err(NameError::Character));
        assert_eq!(check_name(""), Err(NameError::Length));
        assert_eq!(check_name("   "), Err(NameError::Length));
        assert_eq!(
            check_name(&format!("a{}", " ".repeat(64))),
            Err(NameError::Length)
        );
        assert_eq!(check_name(&"x".repeat(65)), Err(NameError::Length));
        for bad in ["a|b", "a<b", "a\nb", "a/b", "\ta"] {
            assert_eq!(check_name(bad), Err(NameError::Character), "{bad}");
        }
    }

    #[test]
    fn records_read_back() {
        let l = Link::parse("abc", "f00|2000|0|3|1500|1000|qa alice").unwrap();
        assert_eq!(
            (
                l.expires_ms,
                l.revoked,
                l.uses,
                l.last_used_ms,
                l.created_ms
            ),
            (2000, false, 3, Some(1500), 1000)
        );
        assert_eq!(l.name, "qa alice");
        assert_eq!(
            Link::parse("abc", "f00|2000|1|0|0|1000|n")
                .unwrap()
                .last_used_ms,
            None
        );
        assert!(Link::parse("abc", "garbage").is_none());
    }
}
