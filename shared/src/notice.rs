//! The operator's notice to the line ("sizes S and M are sold out"): set
//! with `queuegate-scheduler notice`, kept in the queue's config hash,
//! shown on the waiting-room page and in every state reply.

/// The longest notice, in characters.
pub const MAX_CHARS: usize = 280;

/// Why a notice was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    /// Nothing but white space (clear a notice instead).
    #[error("the notice is empty (use --clear to remove one)")]
    Empty,
    /// Over [`MAX_CHARS`].
    #[error("the notice is longer than 280 characters")]
    TooLong,
    /// A control character (a line break, a tab, an escape): a notice is
    /// one line of plain text.
    #[error("the notice must be one line of plain text, without control characters")]
    Control,
}

/// `text` as a notice: trimmed, one line of at most [`MAX_CHARS`]
/// characters. The page shows it as text, never as markup.
pub fn check(text: &str) -> Result<&str, NoticeError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(NoticeError::Empty);
    }
    if text.chars().count() > MAX_CHARS {
        return Err(NoticeError::TooLong);
    }
    if text.chars().any(char::is_control) {
        return Err(NoticeError::Control);
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notice_is_one_short_line_of_text() {
        assert_eq!(
            check("  Sizes S and M are sold out. "),
            Ok("Sizes S and M are sold out.")
        );
        assert_eq!(check("사이즈 S, M 품절 <b>"), Ok("사이즈 S, M 품절 <b>"));
        assert_eq!(
            check(&"é".repeat(MAX_CHARS)).map(str::len),
            Ok(2 * MAX_CHARS)
        );
        assert_eq!(check(&"é".repeat(MAX_CHARS + 1)), Err(NoticeError::TooLong));
        assert_eq!(check(" \t "), Err(NoticeError::Empty));
        for bad in ["one\ntwo", "a\u{1b}[31mred", "tab\there", "nul\0"] {
            assert_eq!(check(bad), Err(NoticeError::Control), "{bad:?}");
        }
    }
}
