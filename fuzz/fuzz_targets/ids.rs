//! `UserId::new` and `QueueId::new`: accept exactly their documented
//! charsets and lengths (checked against an independent oracle), never
//! panic, and keep the text unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use queuegate_shared::{QueueId, UserId};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // 1-64 printable ASCII characters, no spaces or braces (a brace could
    // change a key's hash tag).
    let user_ok = (1..=64).contains(&text.len())
        && text
            .chars()
            .all(|c| ('!'..='~').contains(&c) && c != '{' && c != '}');
    match UserId::new(text) {
        Ok(u) => {
            assert!(user_ok, "user id {text:?} accepted");
            assert_eq!(u.as_str(), text);
            assert_eq!(u.to_string(), text);
        }
        Err(e) => {
            assert!(!user_ok, "user id {text:?} refused: {e}");
            assert!(!e.to_string().is_empty());
        }
    }
    let queue_ok = (1..=32).contains(&text.len())
        && text
            .chars()
            .all(|c| matches!(c, 'a'..='z' | '0'..='9' | '-' | '_'));
    match QueueId::new(text) {
        Ok(q) => {
            assert!(queue_ok, "queue id {text:?} accepted");
            assert_eq!(q.as_str(), text);
            assert!(
                UserId::new(text).is_ok(),
                "every queue id is a valid user id"
            );
        }
        Err(_) => assert!(!queue_ok, "queue id {text:?} refused"),
    }
});
