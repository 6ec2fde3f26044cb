//! Capabilities: the check keeps none. As root without a user namespace
//! this is what stops HAProxy (or a script in it) from using root's powers;
//! inside a user namespace it removes the namespace-local ones too.

const LAST_CAP_GUESS: libc::c_int = 63;
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// In the child: empties the bounding set (so `execve` can grant nothing
/// back), the ambient set, then effective/permitted/inheritable. Returns 0
/// or an errno; raw system calls only.
pub fn drop_all() -> i32 {
    for cap in 0..=LAST_CAP_GUESS {
        // SAFETY: prctl with integer arguments. EINVAL past the kernel's
        // last capability is expected and ends the loop.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
            let e = super::errno();
            if e == libc::EINVAL {
                break;
            }
            // EPERM: no CAP_SETPCAP, so nothing to drop from the bounding set
            // by us; the capset below still empties what we hold.
            if e != libc::EPERM {
                return e;
            }
            break;
        }
    }
    // SAFETY: integer arguments only.
    unsafe { libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) };
    let header = CapHeader { version: CAPABILITY_VERSION_3, pid: 0 };
    let data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: header and the two data words are valid for the call.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()) } != 0 {
        return super::errno();
    }
    0
}
