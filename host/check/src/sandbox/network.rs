//! The check's network, made in the child inside its fresh network
//! namespace: loopback up, and a default route through it for IPv4 and
//! IPv6. A pod's network routes: a `resolvers` section's UDP `connect` to
//! the cluster's DNS address succeeds there, and must here, or HAProxy warns
//! (and `zero-warning` refuses) where the pod passes. Through loopback
//! nothing leaves the namespace: a packet to an address that is not local
//! is dropped (a new namespace does not forward), so the check reaches
//! nothing, as before. Names resolve as on a pod: the world's
//! `resolv.conf` names 127.0.0.1, where the child binds a UDP socket and
//! hands it to the gate ([`hand_over_resolver`]), which answers on it from
//! its own resolver ([`crate::dns`]): the render's queries never leave the
//! namespace either. Raw system calls on constant messages only.

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

/// Where the check's resolver listens, as the world's `resolv.conf` says.
pub const RESOLVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 53);

/// What a child hands the gate, named by the one byte that comes with it.
pub const RESOLVER_SOCKET: u8 = b'r';
/// The render's own tmpfs ([`super::world::Op::Render`]).
pub const RENDER: u8 = b'd';

/// The pair a child hands its resolver socket (and its render's tmpfs)
/// over: (the gate's end, the child's end), both close-on-exec.
pub fn hand_over_channel() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(AddressFamily::UNIX, SocketType::DGRAM, SocketFlags::CLOEXEC, None)?)
}

/// In the child, in its network namespace with loopback up: binds UDP
/// [`RESOLVER`] (port 53 needs the capability the child still has in its
/// own user namespace) and sends the socket over `channel`, the child's
/// end of [`hand_over_channel`]; its own copy closes. 0 or an errno. System
/// calls on the stack only (rustix's, which set no `errno`).
pub fn hand_over_resolver(channel: RawFd) -> i32 {
    let socket = socket(AddressFamily::INET, SocketType::DGRAM)
        .and_then(|socket| rustix::net::bind(&socket, &RESOLVER).map(|()| socket));
    match socket {
        Ok(socket) => hand_over(channel, RESOLVER_SOCKET, &socket),
        Err(e) => e.raw_os_error(),
    }
}

/// In the child: sends `fd` over `channel` with `what` ([`RESOLVER_SOCKET`],
/// [`RENDER`]). 0 or an errno; on the stack only.
pub fn hand_over(channel: RawFd, what: u8, fd: &OwnedFd) -> i32 {
    // SAFETY: the parent keeps the channel open until `spawn` returns.
    let channel = unsafe { BorrowedFd::borrow_raw(channel) };
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    let fds = [fd.as_fd()];
    ancillary.push(SendAncillaryMessage::ScmRights(&fds));
    let tag = [what];
    let sent =
        rustix::net::sendmsg(channel, &[IoSlice::new(&tag)], &mut ancillary, SendFlags::empty());
    super::errno_of(sent.map(drop))
}

/// What a child handed over ([`hand_over`]).
#[derive(Debug, Default)]
pub struct Handed {
    pub resolver: Option<OwnedFd>,
    pub render: Option<OwnedFd>,
}

/// In the gate, once the child's `spawn` has returned: what it handed over
/// on `channel` (the gate's end). A child without a network of its own
/// hands over no resolver; one whose render is bound hands over none. An
/// error after a message keeps what came before it.
pub fn receive(channel: BorrowedFd<'_>) -> (Handed, Option<std::io::Error>) {
    let mut handed = Handed::default();
    loop {
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        let mut tag = [0u8; 1];
        let received = rustix::net::recvmsg(
            channel,
            &mut [IoSliceMut::new(&mut tag)],
            &mut ancillary,
            RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
        );
        if let Err(e) = received {
            return (handed, (e != rustix::io::Errno::AGAIN).then(|| e.into()));
        }
        let fd = ancillary.drain().find_map(|message| match message {
            RecvAncillaryMessage::ScmRights(mut fds) => fds.next(),
            _ => None,
        });
        match tag[0] {
            RESOLVER_SOCKET => handed.resolver = fd,
            RENDER => handed.render = fd,
            _ => {}
        }
    }
}

/// `RTM_NEWROUTE`: `default dev lo` (table main, scope link) for `family`,
/// a netlink message of 36 bytes asking for an acknowledgement.
const fn default_route(family: u8, seq: u32) -> [u8; 36] {
    const RTM_NEWROUTE: u16 = 24;
    const FLAGS: u16 =
        (libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16;
    const RTA_OIF: u16 = 4;
    const LOOPBACK_INDEX: u32 = 1; // always lo's in a new network namespace
    /// `bytes` into `m` at `at`.
    const fn put<const N: usize>(m: &mut [u8; 36], at: usize, bytes: [u8; N]) {
        let mut i = 0;
        while i < N {
            m[at + i] = bytes[i];
            i += 1;
        }
    }
    let mut m = [0u8; 36];
    put(&mut m, 0, 36u32.to_ne_bytes());
    put(&mut m, 4, RTM_NEWROUTE.to_ne_bytes());
    put(&mut m, 6, FLAGS.to_ne_bytes());
    put(&mut m, 8, seq.to_ne_bytes());
    // rtmsg: family, dst_len 0, src_len 0, tos 0, table, protocol, scope, type; flags 0
    let (table, protocol) = (libc::RT_TABLE_MAIN, libc::RTPROT_BOOT);
    put(&mut m, 16, [family, 0, 0, 0, table, protocol, libc::RT_SCOPE_LINK, libc::RTN_UNICAST]);
    // rtattr RTA_OIF: length 8, the interface's index
    put(&mut m, 28, 8u16.to_ne_bytes());
    put(&mut m, 30, RTA_OIF.to_ne_bytes());
    put(&mut m, 32, LOOPBACK_INDEX.to_ne_bytes());
    m
}

const ROUTE_V4: [u8; 36] = default_route(libc::AF_INET as u8, 1);
const ROUTE_V6: [u8; 36] = default_route(libc::AF_INET6 as u8, 2);

/// A close-on-exec socket of `family` and `kind`, protocol 0.
fn socket(family: AddressFamily, kind: SocketType) -> rustix::io::Result<OwnedFd> {
    rustix::net::socket_with(family, kind, SocketFlags::CLOEXEC, None)
}

/// Brings the namespace's loopback interface up. Returns 0 or an errno.
pub fn loopback_up() -> i32 {
    let socket = match socket(AddressFamily::INET, SocketType::DGRAM) {
        Ok(socket) => socket,
        Err(e) => return e.raw_os_error(),
    };
    // SAFETY: plain system calls; `ifreq` is plain data, zeroed, with a
    // NUL-terminated name.
    unsafe {
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo\0".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) != 0 {
            return super::errno();
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &req) != 0 {
            return super::errno();
        }
    }
    0
}

/// Adds the default routes through loopback: IPv4's must be made; IPv6's
/// only where the host has IPv6 (a pod without it has no such route
/// either). Returns 0 or an errno.
pub fn default_routes() -> i32 {
    // NETLINK_ROUTE is protocol 0
    let socket = match socket(AddressFamily::NETLINK, SocketType::RAW) {
        Ok(socket) => socket,
        Err(e) => return e.raw_os_error(),
    };
    match route(&socket, &ROUTE_V4) {
        0 => match route(&socket, &ROUTE_V6) {
            0 | libc::EAFNOSUPPORT | libc::EOPNOTSUPP | libc::EACCES => 0,
            e => e,
        },
        e => e,
    }
}

/// The type of netlink's answer to a request asking for an acknowledgement.
const NLMSG_ERROR: u16 = 2;

/// Sends one request on a netlink socket and reads its acknowledgement: 0,
/// or the errno the kernel answered with.
fn route(socket: &OwnedFd, message: &[u8; 36]) -> i32 {
    if let Err(e) = rustix::net::send(socket, message, SendFlags::empty()) {
        return e.raw_os_error();
    }
    // nlmsghdr (16 bytes) of type NLMSG_ERROR, then the error: 0 is the
    // acknowledgement; any other answer is not one
    let mut answer = [0u8; 128];
    match rustix::net::recv(socket, &mut answer, RecvFlags::empty()) {
        Err(e) => e.raw_os_error(),
        Ok((n, _)) if n < 20 => libc::EIO,
        Ok(_) if u16::from_ne_bytes([answer[4], answer[5]]) != NLMSG_ERROR => libc::EIO,
        Ok(_) => -i32::from_ne_bytes([answer[16], answer[17], answer[18], answer[19]]),
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
