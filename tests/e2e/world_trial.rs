//! The world decided by trying it, through the real binary under a real
//! seccomp filter like a container runtime's (docs/checking.md, "Which
//! world checks get"): the gate never claims a world whose checks cannot
//! run. podman's and CRI-O's default profile refuses `chroot` and
//! `sethostname` to a process without capabilities (even in its own user
//! namespace) and allows `pivot_root`: the root world still works there.
//! Refuse `pivot_root` too and the gate falls back to the config-directory
//! world, saying why; with no usable config directory either, to none.

use crate::support::*;
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::process::{Command, Output, Stdio};

/// `rendergate ARGS` under a seccomp filter (stacked on any the gate
/// installs) that answers `EPERM` to `refused`, as a container's profile
/// answers a call it allows only with a capability the container lacks.
fn filtered(refused: &[libc::c_long], args: &[&str]) -> Command {
    let mut program: Vec<libc::sock_filter> = Vec::new();
    let stmt = |code: u32, k: u32| libc::sock_filter { code: code as u16, jt: 0, jf: 0, k };
    // the syscall number (seccomp_data.nr, offset 0)
    program.push(stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0));
    for nr in refused {
        program.push(libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: *nr as u32,
        });
        program
            .push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32));
    }
    program.push(stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW));
    let mut command = Command::new(BIN);
    command.args(args);
    // SAFETY: between fork and exec only prctl on memory the parent made
    // (the program is moved into the closure and lives until exec); no
    // crate in the tree installs a raw program from a pre_exec hook.
    unsafe {
        command.pre_exec(move || {
            let prog =
                libc::sock_fprog { len: program.len() as u16, filter: program.as_ptr() as *mut _ };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

fn output(mut command: Command) -> Output {
    command.stdin(Stdio::null()).output().expect("start rendergate")
}

fn first_line(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).lines().next().unwrap_or_default().to_owned()
}

/// `check --explain`'s first line, and `check` of the sample render: its
/// exit and what it printed. The sample names `/etc/haproxy` (its
/// `default-path`): with another `--config-dir`, a copy that names none.
fn explain_and_check(refused: &[libc::c_long], extra: &[&str]) -> (String, i32, String) {
    let mut args = vec!["check", "--explain", "--haproxy"];
    let haproxy = haproxy();
    args.push(&haproxy);
    args.extend(extra);
    let explained = output(filtered(refused, &args));
    assert!(explained.status.success(), "--explain: {explained:?}");
    let anywhere = render_dir(&sample_config_anywhere());
    let sample = match extra.contains(&"--config-dir") {
        true => anywhere.path().to_path_buf(),
        false => sample_dir(),
    };
    let mut args = vec!["check", "--haproxy", &haproxy];
    args.extend(extra);
    args.push(sample.to_str().unwrap());
    let checked = output(filtered(refused, &args));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
    (first_line(&explained), checked.status.code().unwrap_or(-1), said)
}

#[test]
fn where_chroot_and_sethostname_are_refused_the_root_world_pivots_and_its_checks_pass() {
    let (line, code, said) = explain_and_check(&[libc::SYS_chroot, libc::SYS_sethostname], &[]);
    assert!(line.ends_with(" world=root"), "claimed: {line}");
    assert_eq!(code, 0, "the sample render in the root world: {said}");
}

#[test]
fn where_the_root_cannot_be_switched_the_config_dir_world_is_claimed_and_says_why() {
    let config_dir = tempfile::tempdir().unwrap();
    let at = config_dir.path().to_str().unwrap();
    let refused = [libc::SYS_chroot, libc::SYS_pivot_root, libc::SYS_sethostname];
    let (line, code, said) = explain_and_check(&refused, &["--config-dir", at]);
    assert!(line.ends_with(" world=config-dir (root: pivot_root: EPERM)"), "claimed: {line}");
    assert_eq!(code, 0, "the sample render in the config-dir world: {said}");
    assert!(
        said.contains("the strongest world could not be set up")
            && said.contains("the worlds were tried again: "),
        "the check said why it moved: {said}"
    );
    // the same through serve: hello names the world, and its checks pass
    let mut command = filtered(
        &refused,
        &["serve", "--check-interval", "0s", "--haproxy", &haproxy(), "--config-dir", at],
    );
    command.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut serve = Serve::spawn(command);
    assert_eq!(serve.hello["world"], "config-dir", "hello: {}", serve.hello);
    serve.send(&rendered("plan-1", "r-1", &sample_config_anywhere()));
    let verdict = serve.until("verdict").pop().unwrap();
    assert_eq!(verdict["ok"], json!(true), "verdict: {verdict}");
    let (_, status) = serve.finish();
    assert!(status.success());
}

#[test]
fn where_no_world_works_none_is_claimed_never_one_whose_checks_cannot_run() {
    // the config directory holds someone's files: the gate may not use it
    let config_dir = tempfile::tempdir().unwrap();
    std::fs::write(config_dir.path().join("theirs.cfg"), "x").unwrap();
    let at = config_dir.path().to_str().unwrap();
    let refused = [libc::SYS_chroot, libc::SYS_pivot_root];
    let (line, code, said) = explain_and_check(&refused, &["--config-dir", at]);
    assert!(line.ends_with(" world=none (root: pivot_root: EPERM)"), "claimed: {line}");
    assert_eq!(code, 2, "no world: could not run: {said}");
    assert!(said.contains("no root of the check's own works here"), "said: {said}");
}

#[test]
fn on_a_host_that_allows_everything_nothing_is_tried_in_vain() {
    let (line, code, said) = explain_and_check(&[], &[]);
    assert!(line.ends_with(" world=root"), "claimed: {line}");
    assert_eq!(code, 0, "{said}");
    assert!(!said.contains("tried again"), "nothing failed, nothing moved: {said}");
}

#[test]
fn where_user_namespaces_are_refused_one_check_moves_to_the_probes_world_without_a_trial() {
    // as Docker's and containerd's default profile refuses `unshare`
    let config_dir = tempfile::tempdir().unwrap();
    let at = config_dir.path().to_str().unwrap();
    let (line, code, said) = explain_and_check(&[libc::SYS_unshare], &["--config-dir", at]);
    assert!(line.contains(" world=config-dir"), "claimed: {line}");
    assert_eq!(code, 0, "the sample render in the config-dir world: {said}");
    assert!(
        said.contains("the strongest world could not be set up")
            && said.contains("the host's probe gives: "),
        "the check said why it moved: {said}"
    );
    // the probe's world worked: no trial, no warning
    assert!(!said.contains("tried again"), "the worlds were tried in vain: {said}");
}
