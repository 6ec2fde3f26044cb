//! Capabilities: the check keeps none. As root without a user namespace
//! this is what stops HAProxy (or a script in it) from using root's powers;
//! inside a user namespace it removes the namespace-local ones too.

const LAST_CAP_GUESS: libc::c_int = 63;

/// In the child: empties the bounding set (so `execve` can grant nothing
/// back), the ambient set, then effective/permitted/inheritable. Returns 0
/// or an errno; system calls only. The bounding set is emptied by number up
/// to the kernel's last capability, which rustix's fixed list may not know.
pub fn drop_all() -> i32 {
    for cap in 0..=LAST_CAP_GUESS {
        // SAFETY: prctl with integer arguments. EINVAL past the kernel's
        // last capability is expected and ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            match super::errno() {
                // EPERM: no CAP_SETPCAP, so nothing to drop from the bounding
                // set by us; the capset below still empties what we hold.
                libc::EINVAL | libc::EPERM => break,
                e => return e,
            }
        }
    }
    let _ = rustix::thread::clear_ambient_capability_set(); // EINVAL: no ambient set
    let none = rustix::thread::CapabilitySet::empty();
    let sets =
        rustix::thread::CapabilitySets { effective: none, permitted: none, inheritable: none };
    super::errno_of(rustix::thread::set_capabilities(None, sets))
}
