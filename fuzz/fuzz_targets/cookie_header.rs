//! `cookie::cookie`: never panics; the value it finds is the first
//! `name=value` pair with that exact name, as written in the header.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use queuegate_edge::cookie::cookie;

#[derive(Debug, Arbitrary)]
struct Input {
    raw_header: String,
    raw_name: String,
    pairs: Vec<(String, String)>,
    pick: usize,
}

/// A cookie name or value as browsers send them: no `;`, `=` (names
/// only), whitespace at the ends or control characters.
fn clean(s: &str, is_name: bool) -> String {
    s.chars()
        .filter(|c| *c != ';' && !(is_name && *c == '=') && !c.is_control())
        .collect::<String>()
        .trim()
        .to_string()
}

fuzz_target!(|input: Input| {
    if let Some(v) = cookie(&input.raw_header, &input.raw_name) {
        assert!(input
            .raw_header
            .contains(&format!("{}={v}", input.raw_name)));
    }

    let pairs: Vec<(String, String)> = input
        .pairs
        .iter()
        .map(|(k, v)| (clean(k, true), clean(v, false)))
        .filter(|(k, _)| !k.is_empty())
        .collect();
    let header = pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("; ");
    for (k, _) in &pairs {
        let first = pairs
            .iter()
            .find(|(k2, _)| k2 == k)
            .map(|(_, v)| v.as_str());
        assert_eq!(cookie(&header, k), first, "{header:?} {k:?}");
    }
    if !pairs.is_empty() {
        let (k, _) = &pairs[input.pick % pairs.len()];
        // A name that is a strict prefix of a present one matches nothing
        // unless it is present itself.
        let prefix = &k[..k.len() - k.chars().last().map_or(0, char::len_utf8)];
        if !prefix.is_empty() && !pairs.iter().any(|(k2, _)| k2 == prefix) {
            assert_eq!(cookie(&header, prefix), None, "{header:?} {prefix:?}");
        }
    }
});
