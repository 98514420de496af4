//! `identity::verify_visitor`: never panics on any cookie value; a minted
//! cookie verifies to its own id; any other string — including every
//! single-edit tampering of a minted cookie — is refused.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use queuegate_edge::identity::{mint_visitor, verify_visitor};

const KEY: &[u8] = b"fuzz-identity-secret-0123456789abcdef";

#[derive(Debug, Arbitrary)]
struct Input {
    random: [u8; 16],
    /// Where to edit the minted cookie, and with what.
    at: usize,
    byte: u8,
    edit: Edit,
    /// A cookie value straight from the fuzzer.
    raw: String,
}

#[derive(Debug, Arbitrary)]
enum Edit {
    Replace,
    Insert,
    Remove,
    Truncate,
}

fuzz_target!(|input: Input| {
    // Arbitrary text: no panic, and only a well-formed id can come out.
    if let Ok(user) = verify_visitor(KEY, &input.raw) {
        assert!(input.raw.starts_with(&format!("{}.", user.as_str())));
    }

    let (user, cookie) = mint_visitor(KEY, input.random);
    assert_eq!(verify_visitor(KEY, &cookie), Ok(user.clone()), "{cookie}");
    assert_eq!(user.as_str().len(), 22);
    assert!(verify_visitor(b"another-secret-another-secret-another", &cookie).is_err());

    let mut bytes = cookie.clone().into_bytes();
    let at = input.at % (bytes.len() + 1);
    match input.edit {
        Edit::Replace if at < bytes.len() => bytes[at] = input.byte,
        Edit::Insert => bytes.insert(at, input.byte),
        Edit::Remove if at < bytes.len() => {
            bytes.remove(at);
        }
        Edit::Truncate => bytes.truncate(at),
        _ => {}
    }
    let Ok(tampered) = String::from_utf8(bytes) else {
        return; // Cookie headers reach the worker as text.
    };
    if tampered != cookie {
        assert!(
            verify_visitor(KEY, &tampered).is_err(),
            "tampered {tampered:?} (from {cookie:?}) verified"
        );
    }
});
