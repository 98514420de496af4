//! The waiting-room page's language, from `Accept-Language` (RFC 9110): the
//! visitor's most preferred language the page has texts for, and the
//! locale its numbers and times are written in.

use crate::navigation::thousandths;

/// The language chosen for a visitor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// One of the page's languages (`ko`), for its texts and `<html lang>`.
    pub lang: &'static str,
    /// The visitor's own tag for it (`ko-KR`), for numbers and times;
    /// the language alone when the tag is odd.
    pub locale: String,
}

/// The first of `accept_language`'s ranges, by `q` then order, whose
/// primary subtag is one of `languages` (the first of which is the
/// fallback, also for `*`). Ranges with `q=0` or an unreadable `q` are
/// skipped.
pub fn choose(accept_language: Option<&str>, languages: &[&'static str]) -> Choice {
    let fallback = languages.first().copied().unwrap_or("en");
    // One pass, no sort: the first range of the highest `q` that matches.
    let mut best: Option<(u16, Choice)> = None;
    for range in accept_language.unwrap_or_default().split(',') {
        let mut parts = range.split(';');
        let tag = parts.next().unwrap_or_default().trim();
        let Some(q) = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .map_or(Some(1_000), |v| thousandths(v.trim()))
        else {
            continue;
        };
        if q == 0 || tag.is_empty() || best.as_ref().is_some_and(|(b, _)| *b >= q) {
            continue;
        }
        if let Some(choice) = matching(tag, languages) {
            best = Some((q, choice));
        }
    }
    best.map(|(_, choice)| choice).unwrap_or_else(|| Choice {
        lang: fallback,
        locale: fallback.to_string(),
    })
}

/// The page's language for one range's `tag`, if it has one.
fn matching(tag: &str, languages: &[&'static str]) -> Option<Choice> {
    let lower = tag.to_ascii_lowercase();
    let mut subtags = lower.split('-');
    let primary = subtags.next().unwrap_or("");
    let rest: Vec<&str> = subtags.collect();
    // Chinese in Traditional script: zh-Hant, and the regions that write it
    // (Taiwan, Hong Kong, Macao) unless Simplified is named; every other zh
    // is Simplified (`zh`).
    let traditional = primary == "zh"
        && (rest.contains(&"hant")
            || (!rest.contains(&"hans") && rest.iter().any(|s| matches!(*s, "tw" | "hk" | "mo"))));
    let own = traditional
        .then(|| languages.iter().find(|l| **l == "zh-Hant"))
        .flatten();
    let lang = own.or_else(|| languages.iter().find(|l| **l == primary))?;
    let well_formed =
        tag.len() <= 35 && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    Some(Choice {
        lang,
        locale: if well_formed {
            tag.to_string()
        } else {
            lang.to_string()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &[&str] = &["en", "de", "ja", "ko", "zh", "zh-Hant"];

    fn pick(header: &str) -> (&'static str, String) {
        let c = choose(Some(header), PAGE);
        (c.lang, c.locale)
    }

    #[test]
    fn the_most_preferred_language_the_page_speaks() {
        assert_eq!(
            pick("ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7"),
            ("ko", "ko-KR".into())
        );
        assert_eq!(
            pick("fr-CH, fr;q=0.9, de;q=0.8, *;q=0.5"),
            ("de", "de".into())
        );
        assert_eq!(pick("en;q=0.5, ja;q=0.9"), ("ja", "ja".into()));
        assert_eq!(
            pick("fr;q=0.9, de;q=0.5, ja;q=0.5, ko;q=0.4"),
            ("de", "de".into()),
            "of equal q, the first"
        );
        assert_eq!(pick("de;q=0.5, fr, ja;q=0.6"), ("ja", "ja".into()));
        assert_eq!(pick("zh-Hans-CN"), ("zh", "zh-Hans-CN".into()));
        // Traditional Chinese for zh-Hant and for Taiwan, Hong Kong and
        // Macao; Simplified for the rest of zh.
        for (asked, lang) in [
            ("zh-TW", "zh-Hant"),
            ("zh-hk", "zh-Hant"),
            ("zh-MO", "zh-Hant"),
            ("zh-Hant", "zh-Hant"),
            ("zh-Hant-CN", "zh-Hant"),
            ("zh-Hans-HK", "zh"),
            ("zh-CN", "zh"),
            ("zh-SG", "zh"),
            ("zh", "zh"),
        ] {
            assert_eq!(pick(asked), (lang, asked.into()), "{asked}");
        }
        // Without a Traditional text, Traditional asks get the Chinese there is.
        assert_eq!(choose(Some("zh-TW"), &["en", "zh"]).lang, "zh");
        assert_eq!(pick("DE-at"), ("de", "DE-at".into()));
        assert_eq!(pick("ko;q=0, de"), ("de", "de".into()));
        assert_eq!(pick("ko;q=abc, de;q=0.1"), ("de", "de".into()));
        assert_eq!(
            pick("ko-\"x\""),
            ("ko", "ko".into()),
            "an odd tag keeps the language"
        );
        // Nothing it speaks: the first, English.
        for header in ["", "fr", "*", "x-klingon;q=1", ",,;;"] {
            assert_eq!(pick(header), ("en", "en".into()), "{header:?}");
        }
        assert_eq!(choose(None, PAGE).lang, "en");
    }
}
