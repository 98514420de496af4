//! Entry tokens: 128 random bits from the caller's CSPRNG, as 32 hex digits.
//! Parsing rejects anything else before it can reach Redis.

/// A well-formed entry token (not necessarily a valid one).
#[derive(Clone, PartialEq, Eq)]
pub struct EntryToken(String);

/// Length of a token in hex digits.
pub const TOKEN_LEN: usize = 32;

impl EntryToken {
    /// A token from 16 random bytes.
    pub fn from_random(bytes: [u8; 16]) -> Self {
        EntryToken(hex::encode(bytes))
    }

    /// Accepts exactly 32 lowercase hex digits.
    pub fn parse(text: &str) -> Option<Self> {
        let ok = text.len() == TOKEN_LEN
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| EntryToken(text.to_string()))
    }

    /// The token text (a secret: never log it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for EntryToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EntryToken(…)")
    }
}

/// What one admission needs from the caller's randomness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The token to issue.
    pub token: EntryToken,
    /// Delay before the token activates, in `[0, jitter window]`.
    pub jitter_ms: u64,
}

impl Grant {
    /// A grant from 24 random bytes: 16 for the token, 8 for the jitter.
    pub fn from_random(bytes: [u8; 24], jitter_window_ms: u64) -> Self {
        let mut token = [0u8; 16];
        token.copy_from_slice(&bytes[..16]);
        let mut jitter = [0u8; 8];
        jitter.copy_from_slice(&bytes[16..]);
        Grant {
            token: EntryToken::from_random(token),
            jitter_ms: u64::from_le_bytes(jitter) % (jitter_window_ms + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_hex_and_parse_strictly() {
        let t = EntryToken::from_random([0xab; 16]);
        assert_eq!(t.expose(), "ab".repeat(16));
        assert_eq!(EntryToken::parse(t.expose()), Some(t.clone()));
        for bad in [
            "",
            "AB".repeat(16).as_str(),
            "ab".repeat(17).as_str(),
            "zz".repeat(16).as_str(),
            "a|b",
        ] {
            assert!(EntryToken::parse(bad).is_none(), "{bad:?}");
        }
        assert_eq!(format!("{t:?}"), "EntryToken(…)");
    }

    #[test]
    fn jitter_stays_in_its_window() {
        for seed in 0..=255u8 {
            let g = Grant::from_random([seed; 24], 2_000);
            assert!(g.jitter_ms <= 2_000);
        }
        assert_eq!(Grant::from_random([7; 24], 0).jitter_ms, 0);
    }
}
