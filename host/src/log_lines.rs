//! One log record, one line. Log lines carry names that come from input
//! (pod names, plan and render ids, correlations, policy notes, paths, error
//! messages quoting a bad line); a newline or a carriage return in one would
//! start a forged record, an ANSI escape would rewrite the operator's
//! terminal. [`OneLine`] wraps the writer of the logs: tracing-subscriber
//! formats a whole event into one buffer and writes it once, so escaping
//! every control character of that write but its final newline keeps each
//! event one line, whatever any call site interpolates, now or later.
//!
//! The escapes are JSON's (`\n`, `\r`, `\t`, `\u001b`): inside a JSON log
//! line's strings they mean the same characters, so a JSON line still parses
//! to the same values (serde_json already escapes C0 controls; this catches
//! DEL, C1 controls and the Unicode line separators as well); in a text line
//! they read as what they stand for.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};
use tracing_subscriber::fmt::MakeWriter;

/// `text` with every control character (and U+2028, U+2029) escaped.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => escaped.push_str("\\n"),
            '\r' => escaped.push_str("\\r"),
            '\t' => escaped.push_str("\\t"),
            c if needs_escape(c) => {
                let _ = write!(escaped, "\\u{:04x}", c as u32);
            }
            c => escaped.push(c),
        }
    }
    Cow::Owned(escaped)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

/// A [`MakeWriter`] whose writers keep each write one line (see the module).
pub struct OneLine<M>(pub M);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for OneLine<M> {
    type Writer = OneLineWriter<M::Writer>;

    fn make_writer(&'a self) -> Self::Writer {
        OneLineWriter(self.0.make_writer())
    }
}

/// Writes each buffer it is given as one line: control characters escaped
/// but a final newline, passed on in one `write_all`.
pub struct OneLineWriter<W>(W);

impl<W: Write> Write for OneLineWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let (body, newline) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, true),
            None => (buf, false),
        };
        let text = String::from_utf8_lossy(body);
        match (&text, escape_controls(&text)) {
            (Cow::Borrowed(_), Cow::Borrowed(_)) => self.0.write_all(buf)?,
            (_, escaped) => {
                let mut line = escaped.into_owned();
                if newline {
                    line.push('\n');
                }
                self.0.write_all(line.as_bytes())?;
            }
        }
        // All of it, escaped: the caller never writes the rest separately.
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_plain_text_is_not_copied() {
        assert!(matches!(escape_controls("ns/haproxy-0 \"plan-1\" é ✓"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("a\nb\rc\td\u{1b}[31me\u{0}f\u{7f}g\u{9b}h\u{2028}i"),
            "a\\nb\\rc\\td\\u001b[31me\\u0000f\\u007fg\\u009bh\\u2028i"
        );
    }

    #[test]
    fn each_write_is_one_line_and_json_stays_the_same_json() {
        let mut out = Vec::new();
        let mut writer = OneLineWriter(&mut out);
        writer.write_all(b"INFO pod=ns/a\n2026-01-01T00:00:00Z ERROR forged\r\x1b[2K\n").unwrap();
        let json = "{\"message\":\"x\u{85}y\u{2029}\",\"pod\":\"ns/a\\nb\"}\n";
        writer.write_all(json.as_bytes()).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "INFO pod=ns/a\\n2026-01-01T00:00:00Z ERROR forged\\r\\u001b[2K");
        let parsed: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(parsed, serde_json::from_str::<serde_json::Value>(json).unwrap());
        assert_eq!(lines.len(), 2);
    }
}
