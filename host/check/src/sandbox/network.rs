//! The check's network, made in the child inside its fresh network
//! namespace: loopback up, and a default route through it for IPv4 and
//! IPv6. A pod's network routes: a `resolvers` section's UDP `connect` to
//! the cluster's DNS address succeeds there, and must here, or HAProxy warns
//! (and `zero-warning` refuses) where the pod passes. Through loopback
//! nothing leaves the namespace: a packet to an address that is not local
//! is dropped (a new namespace does not forward), so the check reaches
//! nothing, as before. Raw system calls on constant messages only.

/// `RTM_NEWROUTE`: `default dev lo` (table main, scope link) for `family`,
/// a netlink message of 36 bytes asking for an acknowledgement.
const fn default_route(family: u8, seq: u32) -> [u8; 36] {
    const RTM_NEWROUTE: u16 = 24;
    const FLAGS: u16 =
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    const RTA_OIF: u16 = 4;
    const LOOPBACK_INDEX: u32 = 1; // always lo's in a new network namespace
    let mut m = [0u8; 36];
    let len = 36u32.to_ne_bytes();
    let kind = RTM_NEWROUTE.to_ne_bytes();
    let flags = FLAGS.to_ne_bytes();
    let seq = seq.to_ne_bytes();
    let mut i = 0;
    while i < 4 {
        m[i] = len[i];
        m[8 + i] = seq[i];
        i += 1;
    }
    m[4] = kind[0];
    m[5] = kind[1];
    m[6] = flags[0];
    m[7] = flags[1];
    // rtmsg: family, dst_len 0, src_len 0, tos 0, table, protocol, scope, type; flags 0
    m[16] = family;
    m[20] = libc::RT_TABLE_MAIN;
    m[21] = libc::RTPROT_BOOT;
    m[22] = libc::RT_SCOPE_LINK;
    m[23] = libc::RTN_UNICAST;
    // rtattr RTA_OIF: length 8, the interface's index
    let attr_len = 8u16.to_ne_bytes();
    let attr = RTA_OIF.to_ne_bytes();
    let index = LOOPBACK_INDEX.to_ne_bytes();
    m[28] = attr_len[0];
    m[29] = attr_len[1];
    m[30] = attr[0];
    m[31] = attr[1];
    let mut i = 0;
    while i < 4 {
        m[32 + i] = index[i];
        i += 1;
    }
    m
}

const ROUTE_V4: [u8; 36] = default_route(libc::AF_INET as u8, 1);
const ROUTE_V6: [u8; 36] = default_route(libc::AF_INET6 as u8, 2);

/// Brings the namespace's loopback interface up. Returns 0 or an errno.
pub fn loopback_up() -> i32 {
    // SAFETY: plain system calls; `ifreq` is plain data, zeroed, with a
    // NUL-terminated name.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return super::landlock::errno();
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        let mut e = 0;
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) != 0 {
            e = super::landlock::errno();
        } else {
            req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
            if libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) != 0 {
                e = super::landlock::errno();
            }
        }
        libc::close(fd);
        e
    }
}

/// Adds the default routes through loopback: IPv4's must be made; IPv6's
/// only where the host has IPv6 (a pod without it has no such route
/// either). Returns 0 or an errno.
pub fn default_routes() -> i32 {
    // SAFETY: plain system calls on constant messages and a stack buffer of
    // the length given; the fd is closed.
    unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        );
        if fd < 0 {
            return super::landlock::errno();
        }
        let mut e = route(fd, &ROUTE_V4);
        if e == 0 {
            let v6 = route(fd, &ROUTE_V6);
            if !matches!(v6, 0 | libc::EAFNOSUPPORT | libc::EOPNOTSUPP | libc::EACCES) {
                e = v6;
            }
        }
        libc::close(fd);
        e
    }
}

/// Sends one request and reads its acknowledgement: 0, or the errno the
/// kernel answered with.
///
/// # Safety
/// `fd` is an open netlink socket.
unsafe fn route(fd: libc::c_int, message: &[u8; 36]) -> i32 {
    // SAFETY: the caller's socket; the buffers are valid for their lengths.
    unsafe {
        if libc::send(fd, message.as_ptr().cast(), message.len(), 0) < 0 {
            return super::landlock::errno();
        }
        // nlmsghdr (16 bytes), then the error: 0 is the acknowledgement
        let mut answer = [0u8; 128];
        let n = libc::recv(fd, answer.as_mut_ptr().cast(), answer.len(), 0);
        if n < 0 {
            return super::landlock::errno();
        }
        if n < 20 {
            return libc::EIO;
        }
        let error = i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]);
        -error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_message_is_rtnetlinks_default_dev_lo() {
        let m = ROUTE_V4;
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]), 36);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 24);
        assert_eq!(m[16], libc::AF_INET as u8);
        assert_eq!((m[17], m[20], m[22]), (0, libc::RT_TABLE_MAIN, libc::RT_SCOPE_LINK));
        assert_eq!(u32::from_ne_bytes([m[32], m[33], m[34], m[35]]), 1);
        assert_eq!(ROUTE_V6[16], libc::AF_INET6 as u8);
    }
}
