//! Which layers this host can give a check, found out once at start-up,
//! and the one line that says so (`sandbox: landlock=enforced(abi=7) …`).
//!
//! `RENDERGATE_SANDBOX_DISABLE=landlock,seccomp,userns,netns,mountns,pidns` makes the
//! probe treat those layers as missing. It is a test and debugging knob
//! (to see strict mode refuse and best-effort mode degrade on a host that
//! has everything), not a configuration. A name that is not a layer is an
//! error at start-up ([`check_disable`]): a typo never leaves a layer on
//! unseen.

use super::{Mode, landlock, namespaces, seccomp};
use std::sync::OnceLock;

/// The variable read by [`Probe::current`].
pub const DISABLE_VAR: &str = "RENDERGATE_SANDBOX_DISABLE";
/// Names the knob accepts.
pub const KNOWN: [&str; 6] = ["landlock", "seccomp", "userns", "netns", "mountns", "pidns"];

/// Why a value of [`DISABLE_VAR`] cannot be taken: a name that is not a
/// layer. A typo must not leave a layer on while the operator believes it off.
pub fn check_disable(value: &str) -> Result<(), String> {
    let unknown: Vec<&str> =
        value.split(',').map(str::trim).filter(|s| !s.is_empty() && !KNOWN.contains(s)).collect();
    match unknown.as_slice() {
        [] => Ok(()),
        names => Err(format!(
            "{DISABLE_VAR}: unknown layer{} {} (known: {})",
            if names.len() == 1 { "" } else { "s" },
            names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", "),
            KNOWN.join(", ")
        )),
    }
}

/// Why `layer` is off: `disable` (comma separated) names it.
fn knob(disable: &str, layer: &str) -> Result<(), String> {
    match disable.split(',').any(|name| name.trim() == layer) {
        true => Err(format!("disabled by {DISABLE_VAR}")),
        false => Ok(()),
    }
}

/// The probe without a trial child: Landlock's ABI and whether seccomp
/// filters, asked of the kernel unless `disable` names them
/// ([`DISABLE_VAR`]); every namespace assumed.
fn without_children(disable: &str) -> Probe {
    let landlock = knob(disable, "landlock").and_then(|()| landlock::abi().map_err(errno_name));
    let seccomp = knob(disable, "seccomp").and_then(|()| {
        // the kernel has seccomp filters where `PR_GET_SECCOMP` answers
        rustix::thread::secure_computing_mode().map_err(|e| errno_name(e.raw_os_error()))?;
        seccomp::program(false).map(drop)
    });
    Probe {
        landlock,
        seccomp,
        userns: Ok(()),
        netns: Ok(()),
        mountns: Ok(()),
        pidns: Ok(namespaces::PROCESSES),
        root_world: Ok(()),
        assumed: true,
    }
}

/// What this host supports. Each `Err` holds why not, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    pub landlock: Result<u32, String>,
    pub seccomp: Result<(), String>,
    /// user + net + ipc + uts together, unprivileged.
    pub userns: Result<(), String>,
    /// net + ipc + uts without a user namespace (needs root).
    pub netns: Result<(), String>,
    /// A mount namespace with the other namespaces, where the check may
    /// mount the host view's stand-ins.
    pub mountns: Result<(), String>,
    /// The namespaces of the check's own processes, with the mount
    /// namespace: [`namespaces::PROCESSES`] or `CLONE_NEWPID` alone.
    pub pidns: Result<libc::c_int, String>,
    /// Whether a root of the check's own works here, as tried
    /// ([`crate::trial`]); `Ok` until a trial says otherwise. Without it the
    /// check gets no mount namespace, and the config-directory world.
    pub root_world: Result<(), String>,
    /// The namespaces were assumed, not tried ([`Probe::assumed`]).
    pub assumed: bool,
}

impl Probe {
    /// The probe of this process, run the first time it is asked for.
    pub fn current() -> &'static Probe {
        static PROBE: OnceLock<Probe> = OnceLock::new();
        PROBE.get_or_init(|| Probe::detect(&std::env::var(DISABLE_VAR).unwrap_or_default()))
    }

    /// Probes the host, treating the layers named in `disable` (comma
    /// separated) as missing.
    pub fn detect(disable: &str) -> Probe {
        let knob = |layer: &str| knob(disable, layer);
        let try_in_child = |flags| namespaces::try_in_child(flags).map_err(errno_name);
        let userns = knob("userns").and_then(|()| try_in_child(namespaces::WITH_USER));
        // only worth knowing when the user namespace is missing
        let netns = knob("netns").and_then(|()| match userns {
            Ok(()) => Ok(()),
            Err(_) => try_in_child(namespaces::WITHOUT_USER),
        });
        let pidns = Err("no mount namespace".to_owned());
        let mut probe = Probe { userns, netns, pidns, assumed: false, ..without_children(disable) };
        let base = probe.namespace_flags();
        let mounts = base | libc::CLONE_NEWNS;
        probe.mountns = knob("mountns").and_then(|()| {
            if base == 0 {
                return Err("no namespaces".to_owned());
            }
            // the usual answer in one child: mounts and processes of its own
            if knob("pidns").is_ok() && try_in_child(mounts | namespaces::PROCESSES).is_ok() {
                probe.pidns = Ok(namespaces::PROCESSES);
                return Ok(());
            }
            try_in_child(mounts)
        });
        if probe.mountns.is_ok() && probe.pidns.is_err() {
            // a host without cgroup namespaces may still give a PID one
            probe.pidns = knob("pidns")
                .and_then(|()| try_in_child(mounts | libc::CLONE_NEWPID))
                .map(|()| libc::CLONE_NEWPID);
        }
        probe
    }

    /// The probe one check starts from without a trial child: Landlock and
    /// seccomp asked of the kernel as [`Probe::detect`] does, every
    /// namespace assumed. The check's own child tries them (two trial
    /// children cost a one-shot check some 2 ms); where its sandbox cannot
    /// be set up, the checker probes and tries the worlds in turn
    /// ([`crate::HaproxyChecker::untried`]). `disable` as for `detect`.
    pub fn assumed(disable: &str) -> Probe {
        if ["userns", "netns", "mountns", "pidns"].iter().any(|n| knob(disable, n).is_err()) {
            return Probe::detect(disable); // a knob asks for the real answer
        }
        without_children(disable)
    }

    /// The namespaces a check gets, with a mount namespace where it may mount.
    pub fn unshare_flags(&self) -> libc::c_int {
        let base = self.namespace_flags();
        if base != 0 && self.mountns.is_ok() && self.root_world.is_ok() {
            base | libc::CLONE_NEWNS | self.pidns.as_ref().map_or(0, |flags| *flags)
        } else {
            base
        }
    }

    /// The namespaces a check gets but the mount namespace: with a user
    /// namespace when possible.
    fn namespace_flags(&self) -> libc::c_int {
        if self.userns.is_ok() && self.netns.is_ok() {
            namespaces::WITH_USER
        } else if self.netns.is_ok() {
            namespaces::WITHOUT_USER
        } else {
            0
        }
    }

    /// Why strict mode cannot run, if it cannot: it needs Landlock and seccomp.
    pub fn strict_gap(&self) -> Option<String> {
        let gaps =
            [("landlock", self.landlock.as_ref().err()), ("seccomp", self.seccomp.as_ref().err())];
        let missing: Vec<String> =
            gaps.iter().filter_map(|(layer, why)| Some(format!("{layer} ({})", (*why)?))).collect();
        (!missing.is_empty()).then(|| {
            format!(
                "sandbox mode strict needs landlock and seccomp; missing on this host: {}",
                missing.join(", ")
            )
        })
    }

    /// Each layer and whether checks get it in `mode` (the gauge's values).
    pub fn layers(&self, mode: Mode) -> Vec<(&'static str, bool)> {
        let strict_blocked = mode == Mode::Strict && self.strict_gap().is_some();
        let on = mode != Mode::Off && !strict_blocked;
        let flags = self.unshare_flags();
        vec![
            ("landlock", on && self.landlock.is_ok()),
            ("seccomp", on && self.seccomp.is_ok()),
            ("userns", on && flags & libc::CLONE_NEWUSER != 0),
            ("netns", on && flags & libc::CLONE_NEWNET != 0),
            ("caps", on),
            ("rlimits", on),
            ("env", on),
        ]
    }

    /// The start-up line, e.g. `sandbox: mode=strict landlock=enforced(abi=7)
    /// seccomp=on userns=on netns=on mountns=on pidns=on caps=dropped rlimits=on env=cleared`.
    pub fn report(&self, mode: Mode) -> String {
        if mode == Mode::Off {
            return "sandbox: mode=off landlock=off seccomp=off netns=off mountns=off pidns=off caps=kept rlimits=off env=inherited (plain exec)"
                .into();
        }
        let off = |why: &String| format!("off({why})");
        let state = |r: &Result<(), String>| r.as_ref().map_or_else(off, |()| "on".to_owned());
        let landlock =
            self.landlock.as_ref().map_or_else(off, |abi| format!("enforced(abi={abi})"));
        let flags = self.unshare_flags();
        // one check's namespaces are its own trial: not yet known to work
        let on = || if self.assumed { "assumed".to_owned() } else { "on".to_owned() };
        let userns = if flags & libc::CLONE_NEWUSER != 0 { on() } else { state(&self.userns) };
        let netns = if flags & libc::CLONE_NEWNET != 0 { on() } else { state(&self.netns) };
        let mountns = match (&self.mountns, &self.root_world) {
            _ if flags & libc::CLONE_NEWNS != 0 => on(),
            // the namespace is there; the root it would hold is not
            (Ok(()), Err(_)) if flags != 0 => "unused".into(),
            (mountns, _) => state(mountns),
        };
        let pidns = match &self.pidns {
            _ if flags & libc::CLONE_NEWPID != 0 => on(),
            // no root of its own to mount its /proc in
            Ok(_) => "unused".into(),
            Err(why) => off(why),
        };
        let mut line = format!(
            "sandbox: mode={} landlock={landlock} seccomp={} userns={userns} netns={netns} mountns={mountns} pidns={pidns} caps=dropped rlimits=on env=cleared",
            mode.name(),
            state(&self.seccomp),
        );
        if mode == Mode::Strict
            && let Some(gap) = self.strict_gap()
        {
            line.push_str(&format!(" -- every check could not run: {gap}"));
        }
        line
    }
}

/// `ENOSYS` rather than "Function not implemented": short, and greppable.
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::ENOSPC => "ENOSPC",
        libc::EUSERS => "EUSERS",
        libc::ENOMEM => "ENOMEM",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        libc::ENOENT => "ENOENT",
        libc::ENOTDIR => "ENOTDIR",
        libc::EROFS => "EROFS",
        libc::EBUSY => "EBUSY",
        _ => return format!("errno {e}"),
    };
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_layer_name_is_an_error_naming_it() {
        assert_eq!(check_disable(""), Ok(()));
        assert_eq!(check_disable("landlock, seccomp,mountns"), Ok(()));
        let e = check_disable("landlock,landlok,netns,uts").unwrap_err();
        assert!(e.contains("unknown layers \"landlok\", \"uts\""), "{e}");
        assert!(e.contains("known: landlock, seccomp, userns, netns, mountns"), "{e}");
    }

    #[test]
    fn this_host_has_every_layer_and_the_line_says_so() {
        let p = Probe::detect("");
        assert!(matches!(p.landlock, Ok(abi) if abi >= 1), "{p:?}");
        assert_eq!(p.seccomp, Ok(()));
        let line = p.report(Mode::Strict);
        assert!(line.starts_with("sandbox: mode=strict landlock=enforced(abi="), "{line}");
        assert!(
            line.contains(" seccomp=on ") && line.ends_with(" rlimits=on env=cleared"),
            "{line}"
        );
        assert_eq!(p.strict_gap(), None);
        assert!(
            p.layers(Mode::Strict)
                .iter()
                .all(|(name, on)| *on || *name == "userns" || *name == "netns")
        );
        assert!(p.layers(Mode::Off).iter().all(|(_, on)| !on));
    }

    #[test]
    fn an_assumed_probe_says_its_namespaces_are_assumed_and_a_knob_asks_the_host() {
        let p = Probe::assumed("");
        assert!(p.assumed);
        let line = p.report(Mode::Strict);
        for layer in ["userns", "netns", "mountns", "pidns"] {
            assert!(line.contains(&format!(" {layer}=assumed ")), "{line}");
        }
        assert_eq!(p.landlock, Probe::detect("").landlock);
        let knob = Probe::assumed("pidns");
        assert!(!knob.assumed && knob.pidns.is_err(), "{knob:?}");
    }

    #[test]
    fn without_a_mount_namespace_the_other_namespaces_stay() {
        let p = Probe::detect("");
        assert_eq!(p.mountns, Ok(()), "this host lets checks mount in their namespace");
        assert_ne!(p.unshare_flags() & libc::CLONE_NEWNS, 0);
        let p = Probe::detect("mountns");
        assert_eq!(p.unshare_flags() & libc::CLONE_NEWNS, 0);
        assert_ne!(p.unshare_flags() & libc::CLONE_NEWNET, 0);
        let line = p.report(Mode::Strict);
        assert!(line.contains(" mountns=off(disabled by"), "{line}");
    }

    #[test]
    fn the_knob_removes_layers_and_strict_mode_says_what_is_missing() {
        let p = Probe::detect("landlock, seccomp,netns,userns,unknown");
        assert_eq!(p.mountns, Err("no namespaces".to_owned()));
        assert_eq!(p.landlock, Err(format!("disabled by {DISABLE_VAR}")));
        assert_eq!(p.seccomp, Err(format!("disabled by {DISABLE_VAR}")));
        assert_eq!(p.unshare_flags(), 0);
        let gap = p.strict_gap().unwrap();
        assert!(
            gap.contains("landlock (disabled by") && gap.contains("seccomp (disabled by"),
            "{gap}"
        );
        let strict = p.report(Mode::Strict);
        assert!(
            strict.contains("landlock=off(disabled by RENDERGATE_SANDBOX_DISABLE)"),
            "{strict}"
        );
        assert!(strict.contains("every check could not run"), "{strict}");
        let best = p.report(Mode::BestEffort);
        assert!(!best.contains("could not run") && best.contains("netns=off(disabled"), "{best}");
        let layers = p.layers(Mode::BestEffort);
        assert!(
            layers.contains(&("landlock", false)) && layers.contains(&("rlimits", true)),
            "{layers:?}"
        );
        assert!(p.layers(Mode::Strict).iter().all(|(_, on)| !on));
    }
}
