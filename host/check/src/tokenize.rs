//! HAProxy's own reading of one config line, so that a rewrite of the
//! checked copy (docs/checking.md, "The checked copy") changes exactly the
//! words HAProxy would read, and nothing else.
//!
//! This follows `parse_line()` in HAProxy's `src/tools.c` (identical in 2.6,
//! 3.0 and 3.2) as `cfgparse.c` calls it: double and single quotes,
//! backslash escapes (`\ `, `\\`, `\t`, `\n`, `\r`, `\#`, `\'`, `\"`, `\$`
//! inside double quotes, `\xHH`), `#` comments (anywhere outside quotes, even
//! glued to a word), and `"${VAR}"` expansion inside double quotes. The line
//! ends at a NUL, a LF or a CR, as HAProxy's does.
//!
//! An expansion depends on the environment HAProxy runs in: [`line_in`]
//! takes what the caller knows of it ([`Lookup`]); a variable it does not
//! know marks the line [`Line::is_exact`] = false, and no rewrite touches it. A line HAProxy would refuse to split (an unmatched
//! quote or brace, a bad `\x` or variable name) is not exact either: it is
//! left for HAProxy to refuse.

use std::ops::Range;

/// One word as HAProxy reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    /// Where the word is in the line, quotes and escapes included.
    pub span: Range<usize>,
    /// What HAProxy reads: quotes removed, escapes applied. Bytes, because
    /// `\xHH` can make any byte.
    pub text: Vec<u8>,
}

impl Word {
    pub fn is(&self, text: &str) -> bool {
        self.text == text.as_bytes()
    }
}

/// Why a line cannot be split the way HAProxy would.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inexact {
    /// HAProxy refuses the line (unmatched quote or brace, bad `\x`, bad
    /// variable name, bad `[*]`).
    Error,
    /// The words depend on environment variables.
    Expands,
    /// A scope line (`[name]`): HAProxy does not split it into words.
    Scope,
}

/// The words of one line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    pub words: Vec<Word>,
    pub inexact: Option<Inexact>,
}

impl Line {
    /// Whether [`Line::words`] are exactly what HAProxy reads.
    pub fn is_exact(&self) -> bool {
        self.inexact.is_none()
    }

    /// The words HAProxy's keyword parsers see: an empty word marks the end
    /// of the argument list (HAProxy warns and ignores what follows).
    pub fn args(&self) -> &[Word] {
        let end = self.words.iter().position(|w| w.text.is_empty()).unwrap_or(self.words.len());
        &self.words[..end]
    }

    /// `args()[i]` is `text`.
    pub fn arg_is(&self, i: usize, text: &str) -> bool {
        self.args().get(i).is_some_and(|w| w.is(text))
    }
}

/// What is known of one environment variable where a line is read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    Value(Vec<u8>),
    Unset,
    Unknown,
}

/// Splits one line (without its `\n`) into words, as HAProxy's config
/// parser does, knowing nothing of the environment.
pub fn line(line: &[u8]) -> Line {
    line_in(line, &|_| Lookup::Unknown)
}

/// As [`line()`], with `env` saying what each `"${NAME}"` holds.
pub fn line_in(line: &[u8], env: &dyn Fn(&[u8]) -> Lookup) -> Line {
    let mut at = 0;
    // cfgparse skips leading blanks, then a `[` starts a scope line.
    while at < line.len() && is_space(line[at]) {
        at += 1;
    }
    if line.get(at) == Some(&b'[') {
        return Line { words: Vec::new(), inexact: Some(Inexact::Scope) };
    }
    let mut words = Vec::new();
    let mut inexact = None;
    let (mut squote, mut dquote) = (false, false);
    let mut quote_open = false;
    let mut current: Option<Word> = None;
    let end_word = |current: &mut Option<Word>, words: &mut Vec<Word>, end: usize| {
        if let Some(mut w) = current.take() {
            w.span.end = end;
            words.push(w);
        }
    };
    loop {
        let c = line.get(at).copied().unwrap_or(0);
        let begin = at;
        // A byte that belongs to the current word (starting one if needed).
        let emit = |current: &mut Option<Word>, byte: Option<u8>| {
            let w = current.get_or_insert_with(|| Word { span: begin..begin, text: Vec::new() });
            if let Some(b) = byte {
                w.text.push(b);
            }
        };
        if c >= b'-' && c != b'\\' {
            emit(&mut current, Some(c));
            at += 1;
        } else if c == 0 || c == b'\n' || c == b'\r' || (c == b'#' && !squote && !dquote) {
            // the end of the line, or a comment
            break;
        } else if c == b'"' && !squote {
            emit(&mut current, None);
            dquote = !dquote;
            quote_open = dquote;
            at += 1;
        } else if c == b'\'' && !dquote {
            emit(&mut current, None);
            squote = !squote;
            quote_open = squote;
            at += 1;
        } else if c == b'\\' && !squote {
            let next = line.get(at + 1).copied().unwrap_or(0);
            let (byte, used) = match next {
                b' ' | b'\\' | b'#' | b'\'' | b'"' => (next, 2),
                b't' => (b'\t', 2),
                b'n' => (b'\n', 2),
                b'r' => (b'\r', 2),
                b'$' if dquote => (b'$', 2),
                b'x' => match (
                    line.get(at + 2).copied().and_then(hex),
                    line.get(at + 3).copied().and_then(hex),
                ) {
                    (Some(hi), Some(lo)) => ((hi << 4) | lo, 4),
                    _ => {
                        inexact = Some(Inexact::Error);
                        break;
                    }
                },
                // not an escape: the backslash is a plain character
                _ => (b'\\', 1),
            };
            emit(&mut current, Some(byte));
            at += used;
        } else if is_space(c) && !squote && !dquote {
            end_word(&mut current, &mut words, at);
            while at < line.len() && is_space(line[at]) {
                at += 1;
            }
        } else if c == b'$' && dquote {
            emit(&mut current, None);
            let Some(var) = variable(line, at) else {
                inexact = Some(Inexact::Error);
                break;
            };
            at = var.end;
            let name = &line[var.name.clone()];
            let lookup =
                if name.starts_with(b".") || var.split_words { Lookup::Unknown } else { env(name) };
            let value = match (lookup, &var.default) {
                (Lookup::Unset, Some(default)) => Some(line[default.clone()].to_vec()),
                (Lookup::Value(v), _) => Some(v),
                (Lookup::Unset, None) => None,
                (Lookup::Unknown, _) => {
                    inexact.get_or_insert(Inexact::Expands);
                    continue;
                }
            };
            match value {
                Some(value) => {
                    if let Some(w) = current.as_mut() {
                        w.text.extend_from_slice(&value);
                    }
                }
                // HAProxy's own quirk: an unset variable swallows the closing
                // quote and the blanks after it, so the next word joins this one.
                None => {
                    if line.get(at) == Some(&b'"') {
                        at += 1;
                        while at < line.len() && is_space(line[at]) {
                            at += 1;
                        }
                        dquote = false;
                        quote_open = false;
                    }
                }
            }
        } else {
            emit(&mut current, Some(c));
            at += 1;
        }
    }
    end_word(&mut current, &mut words, at);
    if quote_open && inexact.is_none() {
        inexact = Some(Inexact::Error);
    }
    Line { words, inexact }
}

/// One `$NAME`, `${NAME}`, `${NAME-default}` or `${NAME[*]}` reference.
struct Variable {
    name: Range<usize>,
    default: Option<Range<usize>>,
    /// `[*]`: the value is split into several words.
    split_words: bool,
    /// Just past the reference.
    end: usize,
}

/// Reads the reference starting at the `$`; `None` where HAProxy reports an error.
fn variable(line: &[u8], dollar: usize) -> Option<Variable> {
    let mut at = dollar + 1;
    let brace = line.get(at) == Some(&b'{');
    if brace {
        at += 1;
    }
    let first = line.get(at).copied().unwrap_or(0);
    if !(first.is_ascii_alphabetic() || first == b'_' || first == b'.') {
        return None;
    }
    let name_start = at;
    if first == b'.' {
        at += 1;
    }
    while line.get(at).is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_') {
        at += 1;
    }
    let name = name_start..at;
    if line[name.clone()].starts_with(b".")
        && !matches!(&line[name.clone()], b".LINE" | b".FILE" | b".SECTION")
    {
        return None;
    }
    let mut split_words = false;
    if line.get(at) == Some(&b'[') && brace {
        if line.get(at + 1) != Some(&b'*') || line.get(at + 2) != Some(&b']') {
            return None;
        }
        split_words = true;
        at += 3;
    }
    let mut default = None;
    if brace {
        if line.get(at) == Some(&b'-') {
            let start = at + 1;
            while line.get(at).is_some_and(|b| *b != b'}' && *b != 0) {
                at += 1;
            }
            default = Some(start..at);
        }
        if line.get(at) != Some(&b'}') {
            return None;
        }
        at += 1;
    }
    Some(Variable { name, default, split_words, end: at })
}

/// C's `isspace` in the C locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(l: &str) -> Vec<String> {
        line(l.as_bytes())
            .words
            .iter()
            .map(|w| String::from_utf8_lossy(&w.text).into_owned())
            .collect()
    }

    fn spans(l: &str) -> Vec<&str> {
        line(l.as_bytes()).words.iter().map(|w| &l[w.span.clone()]).collect()
    }

    #[test]
    fn plain_words_and_blanks() {
        assert_eq!(texts("  bind :80\tssl  crt x.pem  "), ["bind", ":80", "ssl", "crt", "x.pem"]);
        assert_eq!(spans("  user  root  "), ["user", "root"]);
    }

    #[test]
    fn quotes_join_and_spans_keep_them() {
        assert_eq!(texts(r#"user "ro"'ot' "a b""#), ["user", "root", "a b"]);
        assert_eq!(spans(r#"user "ro"'ot' x"#), ["user", r#""ro"'ot'"#, "x"]);
        assert_eq!(texts(r#"a "it's" 'say "hi"'"#), ["a", "it's", r#"say "hi""#]);
        // an empty quoted word is a word (HAProxy: "marks the end of the argument list")
        let l = line(br#"user "" root"#);
        assert_eq!(l.words.len(), 3);
        assert_eq!(l.args().len(), 1);
    }

    #[test]
    fn comments_start_anywhere_outside_quotes() {
        assert_eq!(texts("user root#admin"), ["user", "root"]);
        assert_eq!(spans("user root#admin"), ["user", "root"]);
        assert_eq!(texts("user 'ro#ot' # x"), ["user", "ro#ot"]);
        assert_eq!(texts(r"user ro\#ot"), ["user", "ro#ot"]);
        assert_eq!(texts("# all comment"), Vec::<String>::new());
    }

    #[test]
    fn escapes_follow_haproxy() {
        assert_eq!(texts(r"user \x72oot"), ["user", "root"]);
        assert_eq!(texts(r"a\ b c\\d \q"), ["a b", r"c\d", r"\q"]);
        assert_eq!(texts(r#"x \"y\" \'z\'"#), ["x", "\"y\"", "'z'"]);
        assert_eq!(texts(r"x a\nb"), ["x", "a\nb"]);
        // single quotes take everything literally
        assert_eq!(texts(r"x 'a\x41'"), ["x", r"a\x41"]);
        // \$ is an escape only inside double quotes
        assert_eq!(texts(r#"x \$ "\$""#), ["x", r"\$", "$"]);
        assert_eq!(line(br"user \x7").inexact, Some(Inexact::Error));
    }

    #[test]
    fn unmatched_quotes_are_haproxys_to_refuse() {
        assert_eq!(line(br#"user "root"#).inexact, Some(Inexact::Error));
        assert_eq!(line(b"user 'root").inexact, Some(Inexact::Error));
        assert!(line(br#"user "root""#).is_exact());
    }

    #[test]
    fn expansions_make_a_line_inexact() {
        assert_eq!(line(br#"user "${U}""#).inexact, Some(Inexact::Expands));
        assert_eq!(line(br#"x "$HOME" y"#).inexact, Some(Inexact::Expands));
        assert_eq!(line(br#"x "${A-def}""#).inexact, Some(Inexact::Expands));
        // outside double quotes `$` is a plain character
        assert_eq!(texts("x $HOME"), ["x", "$HOME"]);
        assert!(line(b"x $HOME").is_exact());
        assert_eq!(line(br#"x "${A""#).inexact, Some(Inexact::Error));
        assert_eq!(line(br#"x "$1""#).inexact, Some(Inexact::Error));
        assert_eq!(line(br#"x "${.BAD}""#).inexact, Some(Inexact::Error));
    }

    #[test]
    fn known_variables_expand_as_in_haproxy() {
        let env = |name: &[u8]| match name {
            b"U" => Lookup::Value(b"root".to_vec()),
            b"E" => Lookup::Value(Vec::new()),
            b"GONE" => Lookup::Unset,
            _ => Lookup::Unknown,
        };
        let words = |l: &str| -> Vec<String> {
            let l = line_in(l.as_bytes(), &env);
            assert!(l.is_exact(), "{l:?}");
            l.words.iter().map(|w| String::from_utf8_lossy(&w.text).into_owned()).collect()
        };
        assert_eq!(words(r#"user "${U}""#), ["user", "root"]);
        assert_eq!(words(r#"user "x$U-y""#), ["user", "xroot-y"]);
        assert_eq!(words(r#"user "${GONE-daemon}""#), ["user", "daemon"]);
        assert_eq!(words(r#"a "${E}" b"#), ["a", "", "b"]);
        // an unset variable swallows its closing quote and the blanks after it
        assert_eq!(words(r#"a "${GONE}"   b c"#), ["a", "b", "c"]);
        assert_eq!(line_in(br#"a "${OTHER}""#, &env).inexact, Some(Inexact::Expands));
        assert_eq!(line_in(br#"a "${U[*]}""#, &env).inexact, Some(Inexact::Expands));
        assert_eq!(line_in(br#"a "${.LINE}""#, &env).inexact, Some(Inexact::Expands));
    }

    #[test]
    fn the_line_ends_at_nul_and_cr() {
        assert_eq!(texts("user root\r"), ["user", "root"]);
        assert_eq!(texts("user ro\rot"), ["user", "ro"]);
        assert_eq!(texts("user ro\0ot"), ["user", "ro"]);
    }

    #[test]
    fn scope_lines_are_not_words() {
        assert_eq!(line(b"  [scope]").inexact, Some(Inexact::Scope));
    }
}
