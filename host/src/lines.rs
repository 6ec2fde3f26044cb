//! Reading NDJSON input line by line, bounded (docs/behaviour.md, "Bounded
//! work"). Every reader of input lines uses [`LineReader`]: `serve`'s input
//! loop, the recorder of that input ([`crate::record::RecordedInput`]) and
//! `replay`'s reading of a recording or a plain event stream.
//!
//! A line is held only up to a limit: a longer one is counted, its bytes
//! dropped as they come, and it is handed over as [`Line::Overlong`] with
//! its number and length. Lines are numbered from 1, blank and over-long
//! ones included. A line ends at `\n`, which is not part of it; a `\r`
//! before it is kept (the JSON parser reads it as white space), and so is a
//! last line without a newline. The buffer gives back what one big line
//! made it grow to, so a reader that runs for weeks keeps only what its
//! usual lines need.
//!
//! The core is sans-IO ([`LineReader::take`], [`LineReader::end`]): the
//! recorder sees bytes as they pass through a read, not a buffered input to
//! pull from. [`LineReader::next`] wraps it over an [`AsyncBufRead`].

use std::io;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What the buffer may keep from one line to the next; past it, the buffer
/// is given back, so one big line does not pin its size.
const KEPT_CAPACITY: usize = 1024 * 1024;

/// One line, as the reader hands it over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line within the limit, without its newline.
    Read { number: u64, bytes: &'a [u8] },
    /// A line longer than the limit: its length without the newline. None
    /// of it was held.
    Overlong { number: u64, length: u64 },
}

impl Line<'_> {
    /// The line's number, counted from 1 over every line.
    pub fn number(&self) -> u64 {
        match self {
            Line::Read { number, .. } | Line::Overlong { number, .. } => *number,
        }
    }
}

/// Splits input into lines, holding at most `limit` bytes of one.
#[derive(Debug)]
pub struct LineReader {
    limit: usize,
    /// The current line, while it is within the limit.
    buf: Vec<u8>,
    /// Bytes of the current line so far, held or not.
    length: u64,
    /// Whether the current line went past the limit.
    overlong: bool,
    /// Whether the current line has started: a byte or its newline was taken.
    started: bool,
    /// Whether the current line has ended: the next byte starts another.
    ended: bool,
    /// Lines ended so far.
    number: u64,
}

impl LineReader {
    /// A reader of lines of at most `limit` bytes, newline excluded.
    pub fn new(limit: usize) -> LineReader {
        LineReader {
            limit,
            buf: Vec::new(),
            length: 0,
            overlong: false,
            started: false,
            ended: false,
            number: 0,
        }
    }

    /// Sets the limit for the bytes taken from now on; a line that has
    /// ended keeps what it held.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Takes bytes of `chunk` up to and including the first newline, and
    /// returns how many it took and whether they ended a line; then
    /// [`LineReader::line`] is that line until the next byte is taken.
    pub fn take(&mut self, chunk: &[u8]) -> (usize, bool) {
        if chunk.is_empty() {
            return (0, false);
        }
        self.forget_line();
        self.started = true;
        let (part, done) = match memchr::memchr(b'\n', chunk) {
            Some(at) => (&chunk[..at], true),
            None => (chunk, false),
        };
        self.length += part.len() as u64;
        if !self.overlong {
            let wanted = self.buf.len() + part.len();
            if wanted > self.limit {
                self.overlong = true;
                self.buf = Vec::new();
            } else {
                if wanted > self.buf.capacity() {
                    // Doubling, but never more room than the limit.
                    let grown = wanted.max(self.buf.capacity() * 2).min(self.limit);
                    self.buf.reserve_exact(grown - self.buf.len());
                }
                self.buf.extend_from_slice(part);
            }
        }
        if done {
            self.finish_line();
        }
        (part.len() + usize::from(done), done)
    }

    /// At end of input: whether a last line without its newline ended
    /// there; then [`LineReader::line`] is that line.
    pub fn end(&mut self) -> bool {
        if !self.started || self.ended {
            return false;
        }
        self.finish_line();
        true
    }

    /// The line that ended last, if any.
    pub fn line(&self) -> Option<Line<'_>> {
        if !self.ended {
            return None;
        }
        Some(if self.overlong {
            Line::Overlong { number: self.number, length: self.length }
        } else {
            Line::Read { number: self.number, bytes: &self.buf }
        })
    }

    /// The next line of `input`, or `None` at its end.
    pub async fn next<R: AsyncBufRead + Unpin>(
        &mut self,
        input: &mut R,
    ) -> io::Result<Option<Line<'_>>> {
        // The last line is done with: give back a big line's buffer before
        // waiting, not when the next byte comes (an idle gate holds nothing).
        self.forget_line();
        loop {
            let chunk = input.fill_buf().await?;
            if chunk.is_empty() {
                return Ok(if self.end() { self.line() } else { None });
            }
            let (used, done) = self.take(chunk);
            input.consume(used);
            if done {
                return Ok(self.line());
            }
        }
    }

    fn finish_line(&mut self) {
        self.number += 1;
        self.ended = true;
    }

    /// Drops the line just read, if any, giving back a big buffer now.
    pub fn forget_line(&mut self) {
        if self.ended {
            self.start_next();
        }
    }

    fn start_next(&mut self) {
        if self.buf.capacity() > KEPT_CAPACITY {
            self.buf = Vec::new();
        }
        self.buf.clear();
        self.length = 0;
        self.overlong = false;
        self.started = false;
        self.ended = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owned [`Line`]s, with the buffer's capacity when each was read.
    #[derive(Debug, PartialEq, Eq)]
    enum Owned {
        Read(u64, Vec<u8>),
        Overlong(u64, u64),
    }

    async fn lines(input: &[u8], limit: usize) -> Vec<(Owned, usize)> {
        // A tiny BufReader: lines arrive in many chunks, as from a pipe.
        let mut input = tokio::io::BufReader::with_capacity(3, input);
        let mut reader = LineReader::new(limit);
        let mut out = vec![];
        while let Some(line) = reader.next(&mut input).await.unwrap() {
            let owned = match line {
                Line::Read { number, bytes } => Owned::Read(number, bytes.to_vec()),
                Line::Overlong { number, length } => Owned::Overlong(number, length),
            };
            out.push((owned, reader.buf.capacity()));
        }
        out
    }

    #[tokio::test]
    async fn lines_past_the_limit_are_counted_and_skipped_without_being_held() {
        let got = lines(b"abc\n\n0123456789\nabcdefgh\n0123456789x", 8).await;
        let read: Vec<&Owned> = got.iter().map(|(line, _)| line).collect();
        assert_eq!(
            read,
            [
                &Owned::Read(1, b"abc".to_vec()),
                &Owned::Read(2, vec![]),
                &Owned::Overlong(3, 10),
                &Owned::Read(4, b"abcdefgh".to_vec()),
                &Owned::Overlong(5, 11),
            ]
        );
        assert!(
            got.iter().all(|(_, capacity)| *capacity <= 8),
            "never more room than the limit: {got:?}"
        );
    }

    #[tokio::test]
    async fn a_carriage_return_stays_and_a_last_line_needs_no_newline() {
        let got = lines(b"a\r\n\r\nb", 8).await;
        let read: Vec<Owned> = got.into_iter().map(|(line, _)| line).collect();
        assert_eq!(
            read,
            [
                Owned::Read(1, b"a\r".to_vec()),
                Owned::Read(2, b"\r".to_vec()),
                Owned::Read(3, b"b".to_vec())
            ]
        );
        assert_eq!(lines(b"", 8).await, []);
        assert_eq!(
            lines(b"a\n", 8).await.into_iter().map(|(line, _)| line).collect::<Vec<_>>(),
            [Owned::Read(1, b"a".to_vec())]
        );
    }

    #[tokio::test]
    async fn the_buffer_gives_back_what_a_big_line_grew_it_to() {
        let mut input = vec![b'x'; 2 * KEPT_CAPACITY];
        input.extend_from_slice(b"\nsmall\n");
        let got = lines(&input, usize::MAX).await;
        assert!(got[0].1 >= 2 * KEPT_CAPACITY, "the big line is held whole");
        assert_eq!(got[1].0, Owned::Read(2, b"small".to_vec()));
        assert!(got[1].1 < KEPT_CAPACITY, "then the room is given back: {}", got[1].1);
    }

    #[test]
    fn bytes_pushed_in_pieces_make_the_same_lines() {
        let mut reader = LineReader::new(4);
        assert_eq!(reader.take(b"ab"), (2, false));
        assert_eq!(reader.line(), None);
        assert_eq!(reader.take(b"c\nabcdef"), (2, true));
        assert_eq!(reader.line(), Some(Line::Read { number: 1, bytes: b"abc" }));
        assert_eq!(reader.take(b"abcdef"), (6, false));
        assert!(reader.end());
        assert_eq!(reader.line(), Some(Line::Overlong { number: 2, length: 6 }));
        assert!(!reader.end(), "the input ends once");
    }

    #[test]
    fn a_new_limit_holds_from_the_next_line() {
        let mut reader = LineReader::new(8);
        reader.take(b"abcdef\n");
        reader.set_limit(2);
        assert_eq!(reader.line(), Some(Line::Read { number: 1, bytes: b"abcdef" }));
        reader.take(b"abc\n");
        assert_eq!(reader.line(), Some(Line::Overlong { number: 2, length: 3 }));
    }
}
