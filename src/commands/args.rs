//! A cursor over a command's arguments, in the manner of mini-redis's `Parse`: handlers take arguments
//! one by one and end with [`Args::finish`], so a trailing extra argument is a syntax error, not a
//! silently ignored value.

use bytes::Bytes;

use crate::error::{self, CmdError};
use crate::numeric;

pub struct Args<'a> {
    argv: &'a [Bytes],
    pos: usize,
}

impl<'a> Args<'a> {
    /// A cursor positioned after the command name (`argv[0]`).
    pub fn new(argv: &'a [Bytes]) -> Args<'a> {
        Args { argv, pos: 1 }
    }

    /// A cursor positioned after `skip` leading arguments (e.g. 2 for `CLIENT SETNAME`).
    pub fn skipping(argv: &'a [Bytes], skip: usize) -> Args<'a> {
        Args { argv, pos: skip }
    }

    pub fn remaining(&self) -> usize {
        self.argv.len().saturating_sub(self.pos)
    }

    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub fn peek(&self) -> Option<&'a Bytes> {
        self.argv.get(self.pos)
    }

    /// The next argument, if any.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&'a Bytes> {
        let a = self.argv.get(self.pos);
        if a.is_some() {
            self.pos += 1;
        }
        a
    }

    /// The next argument, or `ERR syntax error`.
    pub fn next_bytes(&mut self) -> Result<&'a Bytes, CmdError> {
        self.next().ok_or(CmdError::Static(error::SYNTAX))
    }

    /// The next argument as a strict integer (Redis `string2ll`), or `ERR value is not an integer
    /// or out of range`.
    pub fn next_i64(&mut self) -> Result<i64, CmdError> {
        let a = self.next_bytes()?;
        numeric::parse_i64(a).ok_or(CmdError::Static(error::NOT_INTEGER))
    }

    /// All remaining arguments.
    pub fn rest(&mut self) -> &'a [Bytes] {
        let r = &self.argv[self.pos.min(self.argv.len())..];
        self.pos = self.argv.len();
        r
    }

    /// True (and consumes it) if the next argument equals `word`, ignoring ASCII case.
    pub fn eat(&mut self, word: &str) -> bool {
        match self.peek() {
            Some(a) if a.eq_ignore_ascii_case(word.as_bytes()) => {
                self.pos += 1;
                true
            }
            _ => false,
        }
    }

    /// Errors with `ERR syntax error` if arguments are left over.
    pub fn finish(&self) -> Result<(), CmdError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(CmdError::Static(error::SYNTAX))
        }
    }
}
