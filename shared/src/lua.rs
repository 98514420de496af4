//! A small Lua 5.1 lexer: the tokens of a script without its comments and
//! string literals. It decides which contract names a script's header
//! declares, and lets tests read the scripts' code (not their prose).

#[cfg(test)]
pub(crate) mod locals;

/// One token of Lua code: a name or keyword, a number, or an operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    /// The token's text as written.
    pub text: &'a str,
    /// Whether it is a name or a keyword (`[A-Za-z_][A-Za-z0-9_]*`).
    pub word: bool,
    /// 1-based line, for error messages.
    pub line: usize,
}

/// The tokens of `text`, comments and string literals left out. Input that
/// Lua would refuse (an unfinished string) ends the scan quietly: the
/// script fails to load in Redis, and the scripts' tests load them all.
pub(crate) fn tokens(text: &str) -> Tokens<'_> {
    Tokens {
        text,
        at: 0,
        line: 1,
    }
}

/// The names and keywords of `text`, outside comments and strings.
pub(crate) fn words(text: &str) -> impl Iterator<Item = &str> {
    tokens(text).filter(|t| t.word).map(|t| t.text)
}

/// Iterator over the tokens of a Lua text (see [`tokens`]).
#[derive(Debug)]
pub(crate) struct Tokens<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        loop {
            let c = self.peek(0)?;
            match c {
                b'\n' => {
                    self.line += 1;
                    self.at += 1;
                }
                c if c.is_ascii_whitespace() => self.at += 1,
                b'-' if self.peek(1) == Some(b'-') => self.skip_comment(),
                b'\'' | b'"' => self.skip_quoted(c),
                _ => match self.long_bracket() {
                    Some(level) => self.skip_long(level),
                    None => return Some(self.token(c)),
                },
            }
        }
    }
}

impl<'a> Tokens<'a> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.text.as_bytes().get(self.at + ahead).copied()
    }

    /// Advances over bytes while `keep` holds, counting lines.
    fn advance_while(&mut self, keep: impl Fn(u8) -> bool) {
        while let Some(c) = self.peek(0).filter(|&c| keep(c)) {
            self.line += usize::from(c == b'\n');
            self.at += 1;
        }
    }

    /// `--[[ … ]]` / `--[==[ … ]==]`, else `--` to the end of the line.
    fn skip_comment(&mut self) {
        self.at += 2;
        match self.long_bracket() {
            Some(level) => self.skip_long(level),
            None => self.advance_while(|c| c != b'\n'),
        }
    }

    /// `'…'` or `"…"`, backslash escapes included (an escaped newline
    /// continues the string, as in Lua).
    fn skip_quoted(&mut self, quote: u8) {
        self.at += 1;
        while let Some(c) = self.peek(0) {
            self.at += 1;
            match c {
                b'\\' => {
                    self.line += usize::from(self.peek(0) == Some(b'\n'));
                    self.at = (self.at + 1).min(self.text.len());
                }
                b'\n' => {
                    self.line += 1;
                    return;
                }
                c if c == quote => return,
                _ => {}
            }
        }
    }

    /// The level (number of `=`) of a long bracket `[==[` opening here.
    fn long_bracket(&self) -> Option<usize> {
        if self.peek(0) != Some(b'[') {
            return None;
        }
        let level = (1..).take_while(|&i| self.peek(i) == Some(b'=')).count();
        (self.peek(level + 1) == Some(b'[')).then_some(level)
    }

    /// A long string or the body of a long comment, up to its `]==]`.
    fn skip_long(&mut self, level: usize) {
        let close = format!("]{}]", "=".repeat(level));
        self.at += level + 2;
        let rest = &self.text[self.at..];
        let len = rest.find(&close).map_or(rest.len(), |i| i + close.len());
        self.line += rest[..len].matches('\n').count();
        self.at += len;
    }

    /// A name, a number or an operator starting here.
    fn token(&mut self, c: u8) -> Token<'a> {
        let start = self.at;
        let line = self.line;
        let word = c.is_ascii_alphabetic() || c == b'_';
        if word {
            self.advance_while(|c| c.is_ascii_alphanumeric() || c == b'_');
        } else if c.is_ascii_digit()
            || (c == b'.' && self.peek(1).is_some_and(|d| d.is_ascii_digit()))
        {
            self.number();
        } else {
            self.operator(c);
        }
        Token {
            text: &self.text[start..self.at],
            word,
            line,
        }
    }

    /// A numeral, read as Lua 5.1's `read_numeral` does (`1e-5`, `0xff`).
    fn number(&mut self) {
        self.advance_while(|c| c.is_ascii_digit() || c == b'.');
        if matches!(self.peek(0), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(0), Some(b'+' | b'-')) {
                self.at += 1;
            }
        }
        self.advance_while(|c| c.is_ascii_alphanumeric() || c == b'_');
    }

    /// `==`, `~=`, `<=`, `>=`, `..`, `...` or one character (a whole UTF-8
    /// character outside ASCII, so slices stay on character boundaries).
    fn operator(&mut self, c: u8) {
        let len = match (c, self.peek(1), self.peek(2)) {
            (b'.', Some(b'.'), Some(b'.')) => 3,
            (b'.', Some(b'.'), _) | (b'=' | b'~' | b'<' | b'>', Some(b'='), _) => 2,
            _ => 1,
        };
        self.at += len;
        while self.at < self.text.len() && !self.text.is_char_boundary(self.at) {
            self.at += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lua: &str) -> Vec<&str> {
        tokens(lua).map(|t| t.text).collect()
    }

    #[test]
    fn comments_and_strings_are_left_out() {
        let lua = "local a = 'local b' -- local c\n\
                   local d = \"x \\\" local e\" --[[ local f\n local g ]] local h\n\
                   local i = [==[ local j ]] ]==] .. [[k]]";
        let names: Vec<&str> = words(lua).collect();
        assert_eq!(
            names,
            ["local", "a", "local", "d", "local", "h", "local", "i"]
        );
    }

    #[test]
    fn operators_and_numbers_are_single_tokens() {
        assert_eq!(
            texts("a==b~=c<=1e-5..0xff...t[1]"),
            ["a", "==", "b", "~=", "c", "<=", "1e-5", "..", "0xff", "...", "t", "[", "1", "]"]
        );
        assert_eq!(texts("x = .5 + 3.25"), ["x", "=", ".5", "+", "3.25"]);
    }

    #[test]
    fn lines_are_counted_through_comments_and_strings() {
        let lua = "a --[[\n\n]] b '\\\n' c [[\n]] d -- x\ne";
        let lines: Vec<(&str, usize)> = tokens(lua).map(|t| (t.text, t.line)).collect();
        assert_eq!(lines, [("a", 1), ("b", 3), ("c", 4), ("d", 5), ("e", 6)]);
    }

    #[test]
    fn unfinished_input_ends_the_scan() {
        assert_eq!(texts("a 'b"), ["a"]);
        assert_eq!(texts("a --[[ b"), ["a"]);
        assert_eq!(texts("a [=[ b ]]"), ["a"]);
        assert_eq!(texts("a → b"), ["a", "→", "b"]);
    }
}
