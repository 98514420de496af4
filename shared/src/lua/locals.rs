//! Counts the local variables of a script's main function. Redis's Lua 5.1
//! refuses a function with more than 200 active at once, and says so only
//! at SCRIPT LOAD, so a test keeps every script well under that.

use std::iter::Peekable;

use super::{tokens, Token, Tokens};

/// The locals of a script's main function (nested functions have their
/// own limit and are not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Locals {
    /// Declared at the top level: each stays active to the end.
    pub top_level: usize,
    /// Most active at once: the top-level ones declared so far plus those
    /// of the enclosing blocks, a `for`'s three hidden control variables
    /// and its named ones included. This is what Lua limits.
    pub peak: usize,
}

/// Why a text's blocks could not be followed (its counts would be wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShapeError {
    /// `end`, `until`, `else` or `elseif` with no block to close.
    #[error("line {line}: `{word}` closes no block")]
    UnexpectedClose { word: String, line: usize },
    /// Blocks still open at the end of the text.
    #[error("{open} block(s) still open at the end")]
    Unclosed { open: usize },
}

/// Counts the main function's locals in `lua` (comments and strings are
/// skipped; `local a, b` is two, `local function f` one).
pub(crate) fn count(lua: &str) -> Result<Locals, ShapeError> {
    let mut counter = Counter::default();
    let mut tokens = tokens(lua).peekable();
    while let Some(token) = tokens.next() {
        if token.word {
            counter.keyword(token, &mut tokens)?;
        }
    }
    match counter.frames.len() {
        0 => Ok(Locals {
            top_level: counter.top_level,
            peak: counter.peak,
        }),
        open => Err(ShapeError::Unclosed { open }),
    }
}

/// An open block: a function body, or a block of the function around it.
#[derive(Debug)]
struct Frame {
    function: bool,
    locals: usize,
}

#[derive(Debug, Default)]
struct Counter {
    frames: Vec<Frame>,
    top_level: usize,
    peak: usize,
    /// Variables of a `for` whose `do` has not opened its block yet.
    for_vars: usize,
}

/// Hidden locals Lua 5.1 keeps for each `for` loop (index, limit, step or
/// generator, state, control). Checked on Redis 7.0: 196 top-level locals
/// and a numeric `for` load, 197 do not.
const FOR_CONTROL: usize = 3;

impl Counter {
    fn keyword(
        &mut self,
        token: Token<'_>,
        rest: &mut Peekable<Tokens<'_>>,
    ) -> Result<(), ShapeError> {
        match token.text {
            "local" => self.local(rest),
            "function" => self.open(true),
            "if" | "repeat" => self.open(false),
            "do" => {
                self.open(false);
                let vars = std::mem::take(&mut self.for_vars);
                self.declare(vars);
            }
            "for" => self.for_vars = FOR_CONTROL + names(rest),
            "elseif" | "else" => match self.frames.last_mut() {
                Some(block) if !block.function => block.locals = 0,
                _ => return Err(unexpected(token)),
            },
            "end" | "until" => {
                self.frames.pop().ok_or_else(|| unexpected(token))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// `local function f` (its body opens when `function` is read) or
    /// `local a, b, c`.
    fn local(&mut self, rest: &mut Peekable<Tokens<'_>>) {
        if rest.peek().is_some_and(|t| t.text == "function") {
            self.declare(1);
        } else {
            let n = names(rest);
            self.declare(n);
        }
    }

    fn open(&mut self, function: bool) {
        self.frames.push(Frame {
            function,
            locals: 0,
        });
    }

    /// Adds `n` locals to the innermost block, if it belongs to the main
    /// function.
    fn declare(&mut self, n: usize) {
        if self.frames.iter().any(|f| f.function) {
            return;
        }
        match self.frames.last_mut() {
            Some(block) => block.locals += n,
            None => self.top_level += n,
        }
        let active = self.top_level + self.frames.iter().map(|f| f.locals).sum::<usize>();
        self.peak = self.peak.max(active);
    }
}

/// Reads a name list `a, b, c` and returns its length.
fn names(rest: &mut Peekable<Tokens<'_>>) -> usize {
    let mut n = 0;
    while rest.next_if(|t| t.word).is_some() {
        n += 1;
        if rest.next_if(|t| t.text == ",").is_none() {
            break;
        }
    }
    n
}

fn unexpected(token: Token<'_>) -> ShapeError {
    ShapeError::UnexpectedClose {
        word: token.text.to_string(),
        line: token.line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locals(lua: &str) -> (usize, usize) {
        let l = count(lua).unwrap();
        (l.top_level, l.peak)
    }

    #[test]
    fn a_name_list_counts_each_name() {
        assert_eq!(
            locals("local a, b, c = 1, 2, 3\nlocal d\nlocal e = a"),
            (5, 5)
        );
        assert_eq!(locals("local function f() end local g = f"), (2, 2));
    }

    #[test]
    fn block_locals_end_with_their_block() {
        let lua = "local a\n\
                   if a then local b, c\n\
                   elseif b then local d\n\
                   else local e end\n\
                   do local f, g do local h end end\n\
                   local i";
        assert_eq!(locals(lua), (2, 4));
    }

    #[test]
    fn loops_open_one_block_each_with_their_control_variables() {
        assert_eq!(
            locals("local a\nfor i = 1, 3 do local b end\nlocal c"),
            (2, 6)
        );
        assert_eq!(locals("for k, v in pairs(t) do local x, y end"), (0, 7));
        assert_eq!(locals("while x do local a, b end local c"), (1, 2));
        assert_eq!(locals("repeat local a, b, c until a local d"), (1, 3));
        assert_eq!(locals("for i = 1, 2 do for j = 1, 2 do end end"), (0, 8));
    }

    #[test]
    fn locals_of_nested_functions_are_theirs() {
        let lua = "local function f(a, b)\n\
                     local x, y, z\n\
                     for i = 1, 9 do local w end\n\
                   end\n\
                   local g = function() local q if q then local r end end\n\
                   function t.m(self) local s end";
        assert_eq!(locals(lua), (2, 2));
    }

    #[test]
    fn comments_and_strings_declare_nothing() {
        let lua = "-- local a\n--[[ local b\n do ]] local s = 'local c' .. \"do local d\" .. [[local e end]]";
        assert_eq!(locals(lua), (1, 1));
    }

    #[test]
    fn unbalanced_blocks_are_refused() {
        assert_eq!(
            count("local a\nend"),
            Err(ShapeError::UnexpectedClose {
                word: "end".into(),
                line: 2
            })
        );
        assert_eq!(count("if a then"), Err(ShapeError::Unclosed { open: 1 }));
        assert!(count("else").is_err());
    }
}
