//! The Lua a script ships as: its text without full-line comments and
//! blank lines. The comments (each script's contract, the reasons) stay in
//! `shared/lua/*.lua` for readers; the worker's wasm carries every script it
//! may EVAL, so it carries them without (docs/edge.md, *Size*). Used by
//! `build.rs` at build time and by the tests.

/// `text` without lines that are empty or only a `--` comment. A line with
/// code keeps its trailing comment: telling `--` in a string from one that
/// starts a comment would need a Lua lexer, for a few hundred bytes.
pub fn strip_comment_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let code = line.trim_start();
        if code.is_empty() || code.starts_with("--") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}
