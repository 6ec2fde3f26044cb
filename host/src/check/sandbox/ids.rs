//! User and group names, resolved in the parent: `user haproxy` in
//! `global` makes HAProxy call `getpwnam` while parsing, which reads
//! `/etc/passwd`, a file the sandbox must hide (`acl -f /etc/passwd` would
//! quote it). The checked copy of the config says `uid N` / `gid N` instead
//! ([`crate::check::checked_copy`] finds the names the way HAProxy does);
//! this module answers what a name's id is on this host. A name this host
//! does not know stays a name: HAProxy then refuses it, as it would
//! unsandboxed.

use crate::check::checked_copy::IdKind;
use std::ffi::CString;

/// The id of a user or group name on this host (`getpwnam_r`/`getgrnam_r`).
pub fn lookup(kind: IdKind, name: &[u8]) -> Option<u32> {
    let user = kind == IdKind::User;
    let c = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    if user {
        // SAFETY: all pointers are valid for the call; buf outlives the result.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found = std::ptr::null_mut();
        let r = unsafe { libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found) };
        (r == 0 && !found.is_null()).then_some(pw.pw_uid)
    } else {
        // SAFETY: as above.
        let mut gr: libc::group = unsafe { std::mem::zeroed() };
        let mut found = std::ptr::null_mut();
        let r = unsafe { libc::getgrnam_r(c.as_ptr(), &mut gr, buf.as_mut_ptr(), buf.len(), &mut found) };
        (r == 0 && !found.is_null()).then_some(gr.gr_gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_names_resolve_and_unknown_ones_do_not() {
        assert_eq!(lookup(IdKind::User, b"root"), Some(0));
        assert_eq!(lookup(IdKind::Group, b"root"), Some(0));
        assert_eq!(lookup(IdKind::User, b"no-such-user-here"), None);
        assert_eq!(lookup(IdKind::Group, b"nul\0byte"), None);
    }
}
