//! The check's world, decided by trying it (docs/checking.md, "Which world
//! checks get"). A probe of each layer alone cannot tell whether a world
//! works: a container's seccomp filter may allow the namespaces and the
//! mounts and refuse what the world does inside them (`chroot` without
//! `CAP_SYS_CHROOT` under podman's and CRI-O's default profile). So the gate
//! judges a tiny config through the world its checks would use, with the
//! very operations of every check (the checker's own `check`), and when
//! the sandbox cannot be set up there it tries the next world: root, then
//! config-dir, then none. What failed is kept, for the start-up line
//! (`world=config-dir (root: chroot: EPERM)`), `--explain` and the log.
//! The checker tries the worlds again when its checks stop being able to
//! set up their sandbox (`HaproxyChecker::try_again`).

use rendergate_core::CheckOutcome;
use std::time::Duration;

/// The config each world is tried with: valid on every supported HAProxy
/// (a listener, so that it passes with exit 0), naming nothing outside
/// itself.
pub const CONFIG: &str = "\
global
defaults
  mode http
  timeout client 1s
  timeout server 1s
  timeout connect 1s
frontend trial
  bind 127.0.0.1:8080
";

/// How long one world's trial may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// What judging [`CONFIG`] through a world said of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trial {
    /// The config passed: checks can run in this world.
    Works,
    /// The world could not be made, or HAProxy could not judge a valid
    /// config in it: why, in short (`chroot: EPERM`).
    Fails(String),
    /// Nothing about the world could be learnt (no binary, a timeout):
    /// the world stays, and the next check tells.
    Untold(String),
}

/// Reads a trial's outcome: a failure of the sandbox's setup (or of the
/// world's making) fails the world; a valid config refused in it fails it
/// too (the world lacks what HAProxy needs); anything else tells nothing.
pub fn read(outcome: &CheckOutcome) -> Trial {
    match outcome {
        CheckOutcome::Passed { .. } => Trial::Works,
        CheckOutcome::Refused { message } => {
            Trial::Fails(format!("a valid config was refused: {}", first_line(message)))
        }
        CheckOutcome::Unavailable { reason } if is_sandbox_failure(reason) => {
            Trial::Fails(short(reason))
        }
        CheckOutcome::Unavailable { reason } => Trial::Untold(first_line(reason).to_owned()),
    }
}

/// Whether a check could not run because its sandbox or world could not be
/// set up (as opposed to the binary, the render or the deadline).
pub fn is_sandbox_failure(reason: &str) -> bool {
    reason.starts_with("sandbox setup failed in layer")
        || reason.starts_with("cannot build the check's world")
        || reason.starts_with("the check's world has no private directory")
}

/// `sandbox setup failed in layer 'world' at chroot: Operation not
/// permitted (os error 1) (EPERM)` is `chroot: EPERM`; `… in layer
/// 'landlock': … (E2BIG)` is `landlock: E2BIG`; anything else its first line.
pub fn short(reason: &str) -> String {
    let rest = reason.strip_prefix("sandbox setup failed in layer '");
    let Some((layer, rest)) = rest.and_then(|rest| rest.split_once('\'')) else {
        return first_line(reason).to_owned();
    };
    let (what, errno_text) = match rest.strip_prefix(" at ") {
        Some(at) => at.split_once(": ").unwrap_or((at, "")),
        None => (layer, rest.strip_prefix(": ").unwrap_or(rest)),
    };
    let errno = errno_text
        .rsplit_once('(')
        .and_then(|(_, name)| name.strip_suffix(')'))
        .filter(|name| !name.is_empty())
        .unwrap_or(errno_text);
    format!("{what}: {errno}")
}

/// Whether a check could not run for a reason of the gate's sandbox or
/// world that holds every check alike (the trial's failures, no world, a
/// strict sandbox this host cannot give, no check directory): `/healthz`
/// says so, since every render is held while it lasts. A missing binary, a
/// timeout or a render's own path problem are not.
pub fn holds_every_check(reason: &str) -> bool {
    is_sandbox_failure(reason)
        || [
            "sandbox mode strict needs",
            "this host gives no namespaces for the check's world",
            "no root of the check's own works here",
            "no world for checks works on this host",
            "cannot create a check directory in",
            "cannot read the stock files",
        ]
        .iter()
        .any(|prefix| reason.starts_with(prefix))
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_world_steps_failure_reads_as_the_step_and_its_errno() {
        let reason = "sandbox setup failed in layer 'world' at chroot: Operation not permitted (os error 1) (EPERM)";
        assert_eq!(short(reason), "chroot: EPERM");
        let reason =
            "sandbox setup failed in layer 'landlock': Argument list too long (os error 7) (E2BIG)";
        assert_eq!(short(reason), "landlock: E2BIG");
        assert_eq!(
            short("cannot build the check's world: x\nmore"),
            "cannot build the check's world: x"
        );
    }

    #[test]
    fn what_holds_every_check_is_the_sandbox_s_never_the_binary_s_nor_the_render_s() {
        assert!(holds_every_check("sandbox setup failed in layer 'seccomp': x (EPERM)"));
        assert!(holds_every_check(
            "sandbox mode strict needs landlock and seccomp; missing on this host: x"
        ));
        assert!(holds_every_check(
            "no root of the check's own works here (root: chroot: EPERM), and x"
        ));
        assert!(!holds_every_check("haproxy binary not found: haproxy"));
        assert!(!holds_every_check("the check timed out after 30s"));
    }

    #[test]
    fn only_a_sandbox_failure_or_a_refused_valid_config_fails_a_world() {
        let unavailable = |reason: &str| CheckOutcome::Unavailable { reason: reason.into() };
        assert_eq!(
            read(&unavailable(
                "sandbox setup failed in layer 'world' at pivot_root: Invalid argument (os error 22) (EINVAL)"
            )),
            Trial::Fails("pivot_root: EINVAL".into())
        );
        assert_eq!(
            read(&unavailable("haproxy binary not found: haproxy")),
            Trial::Untold("haproxy binary not found: haproxy".into())
        );
        assert!(matches!(
            read(&CheckOutcome::Refused { message: "[ALERT] x\ny".into() }),
            Trial::Fails(why) if why == "a valid config was refused: [ALERT] x"
        ));
    }
}
