//! `EntryToken::parse`: accepts exactly 32 lowercase hex digits (checked
//! against an independent oracle), keeps the text unchanged, and every
//! token made from random bytes parses back to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queuegate_shared::token::{EntryToken, Grant, TOKEN_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let oracle =
            text.len() == TOKEN_LEN && text.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
        match EntryToken::parse(text) {
            Some(t) => {
                assert!(oracle, "{text:?} accepted");
                assert_eq!(t.expose(), text);
                assert_eq!(format!("{t:?}"), "EntryToken(…)", "Debug never shows it");
            }
            None => assert!(!oracle, "{text:?} refused"),
        }
    }
    if data.len() >= 24 {
        let mut bytes = [0u8; 24];
        bytes.copy_from_slice(&data[..24]);
        let window = u64::from(data.get(24).copied().unwrap_or(0)) * 100;
        let grant = Grant::from_random(bytes, window);
        assert!(grant.jitter_ms <= window);
        let text = grant.token.expose();
        assert_eq!(EntryToken::parse(text), Some(grant.token.clone()));
        let decoded: Vec<u8> = (0..16)
            .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert_eq!(decoded, &bytes[..16], "the token encodes its bytes");
    }
});
