//! User and group names, resolved in the parent: `user haproxy` in
//! `global` makes HAProxy call `getpwnam` while parsing, which reads
//! `/etc/passwd`, a file the sandbox must hide (`acl -f /etc/passwd` would
//! quote it). The check's copy of the config says `uid N` / `gid N`
//! instead, on the same line, so line numbers and the shown config (the
//! render's own) are unchanged. A name this host does not know is left as
//! it is: HAProxy then refuses it, as it would unsandboxed.

use std::ffi::CString;

/// Section keywords: a line starting with one opens a new section.
const SECTIONS: [&str; 15] = [
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "userlist",
    "peers",
    "resolvers",
    "mailers",
    "program",
    "http-errors",
    "ring",
    "cache",
    "fcgi-app",
    "crt-store",
];

/// Rewrites user and group names to numeric ids where HAProxy would look
/// them up: `user NAME` / `group NAME` in `global`, and the `user` / `group`
/// options of `stats socket`, `bind` and `unix-bind` lines. Names may be
/// quoted; a rewritten line loses its trailing comment, never its place.
pub fn resolve_global_ids(config: &str) -> String {
    let mut out = String::with_capacity(config.len());
    let mut in_global = false;
    for line in config.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let ending = &line[body.len()..];
        let words = words(body);
        if let Some(first) = words.first()
            && SECTIONS.contains(&first.as_str())
        {
            in_global = first == "global";
        }
        match rewrite(&words, in_global) {
            Some(words) => {
                let indent = &body[..body.len() - body.trim_start().len()];
                out.push_str(indent);
                out.push_str(&words.join(" "));
                out.push_str(ending);
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The words of a line up to its comment, quotes removed.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let (mut quote, mut in_word) = (None, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '#') if !in_word => break,
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The line's words with names turned into ids, if any name was.
fn rewrite(words: &[String], in_global: bool) -> Option<Vec<String>> {
    let head: Vec<&str> = words.iter().take(2).map(String::as_str).collect();
    let options_from = match head.as_slice() {
        ["user" | "group", _] if in_global && words.len() == 2 => 0,
        ["stats", "socket"] => 3,
        ["bind", ..] => 2,
        ["unix-bind", ..] => 1,
        _ => return None,
    };
    let mut out = words.to_vec();
    let mut changed = false;
    let mut i = options_from;
    while i + 1 < out.len() {
        let id = match out[i].as_str() {
            "user" => lookup(&out[i + 1], true).map(|id| ("uid", id)),
            "group" => lookup(&out[i + 1], false).map(|id| ("gid", id)),
            _ => None,
        };
        if let Some((keyword, id)) = id {
            out[i] = keyword.to_owned();
            out[i + 1] = id.to_string();
            changed = true;
            i += 2;
        } else {
            i += 1;
        }
    }
    changed.then_some(out)
}

fn lookup(name: &str, user: bool) -> Option<u32> {
    if name.bytes().all(|b| b.is_ascii_digit()) {
        return None; // not a name: left for HAProxy to judge, as unsandboxed
    }
    let c = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    if user {
        // SAFETY: all pointers are valid for the call; buf outlives the result.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found = std::ptr::null_mut();
        let r = unsafe {
            libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found)
        };
        (r == 0 && !found.is_null()).then_some(pw.pw_uid)
    } else {
        // SAFETY: as above.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut found = std::ptr::null_mut();
        let r = unsafe {
            libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found)
        };
        (r == 0 && !found.is_null()).then_some(gr.gr_gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_commented_and_option_spellings_become_ids() {
        let config = "global\n  user \"root\" # the admin\n  group 'root'\n  stats socket /run/s.sock mode 600 user root group root level admin\n  unix-bind prefix /run mode 770 user root group root\nfrontend f\n  bind /run/f.sock user root group root\n  bind :80 name user\n";
        assert_eq!(
            resolve_global_ids(config),
            "global\n  uid 0\n  gid 0\n  stats socket /run/s.sock mode 600 uid 0 gid 0 level admin\n  unix-bind prefix /run mode 770 uid 0 gid 0\nfrontend f\n  bind /run/f.sock uid 0 gid 0\n  bind :80 name user\n"
        );
    }

    #[test]
    fn names_in_global_become_ids_and_nothing_else_moves() {
        let config = "global\n  user root\n  group root\r\n  user no-such-user-here\nuserlist L\n  user root password x\n  group root\n";
        assert_eq!(
            resolve_global_ids(config),
            "global\n  uid 0\n  gid 0\r\n  user no-such-user-here\nuserlist L\n  user root password x\n  group root\n"
        );
    }
}
