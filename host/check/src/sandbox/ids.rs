//! User and group names, answered without the host's accounts: `user
//! haproxy` in `global` makes HAProxy call `getpwnam` while parsing, which
//! reads `/etc/passwd`, a file the sandbox must hide (`acl -f /etc/passwd`
//! would quote it). The checked copy of the config says `uid N` / `gid N`
//! instead ([`crate::checked_copy`] finds the names the way HAProxy
//! does), and this module says what N is: the same fixed id for every name.
//!
//! Why not the host's answer: the render runs on the fleet's hosts, not the
//! gate's. Looking names up here would refuse a render whose user exists
//! where it runs but not on the gate's host, and would tell a render which
//! accounts the gate's host has (docs/checking.md, "What HAProxy sees of
//! the host").

use crate::checked_copy::IdKind;

/// The id every user and group name stands for (`nobody`/`nogroup` by
/// custom): `haproxy -c` only needs the name to resolve.
pub const FIXED_ID: u32 = 65534;

/// The id of a user or group name: [`FIXED_ID`] for any name `getpwnam`
/// could be asked about (not empty, no NUL byte).
pub fn lookup(_kind: IdKind, name: &[u8]) -> Option<u32> {
    (!name.is_empty() && !name.contains(&0)).then_some(FIXED_ID)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_answers_the_same_whether_the_host_knows_it_or_not() {
        assert_eq!(lookup(IdKind::User, b"root"), Some(FIXED_ID));
        assert_eq!(lookup(IdKind::Group, b"root"), Some(FIXED_ID));
        assert_eq!(lookup(IdKind::User, b"no-such-user-here"), Some(FIXED_ID));
        assert_eq!(lookup(IdKind::Group, b"nul\0byte"), None);
        assert_eq!(lookup(IdKind::User, b""), None);
    }
}
