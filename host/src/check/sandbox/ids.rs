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

/// Rewrites `user NAME` / `group NAME` in `global` sections to numeric ids.
pub fn resolve_global_ids(config: &str) -> String {
    let mut out = String::with_capacity(config.len());
    let mut in_global = false;
    for line in config.split_inclusive('\n') {
        let mut words = line.split_whitespace();
        let first = words.next();
        if let Some(first) = first
            && SECTIONS.contains(&first)
        {
            in_global = first == "global";
        }
        let (name, rest) = (words.next(), words.next());
        let replaced = match (in_global, first, name, rest) {
            (true, Some("user"), Some(name), None) => lookup(name, true).map(|id| ("uid", id)),
            (true, Some("group"), Some(name), None) => lookup(name, false).map(|id| ("gid", id)),
            _ => None,
        };
        match replaced {
            Some((keyword, id)) => {
                let indent = &line[..line.len() - line.trim_start().len()];
                let ending = if line.ends_with("\r\n") {
                    "\r\n"
                } else if line.ends_with('\n') {
                    "\n"
                } else {
                    ""
                };
                out.push_str(&format!("{indent}{keyword} {id}{ending}"));
            }
            None => out.push_str(line),
        }
    }
    out
}

/// The id of a user (or group) name, with the reentrant libc calls.
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
    fn names_in_global_become_ids_and_nothing_else_moves() {
        let config = "global\n  user root\n  group root\r\n  user no-such-user-here\nuserlist L\n  user root password x\n  group root\n";
        assert_eq!(
            resolve_global_ids(config),
            "global\n  uid 0\n  gid 0\r\n  user no-such-user-here\nuserlist L\n  user root password x\n  group root\n"
        );
    }
}
