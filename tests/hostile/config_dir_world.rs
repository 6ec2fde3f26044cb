//! Every case of the suite again, in the config-directory world: no mount
//! namespace (`RENDERGATE_SANDBOX_DISABLE=mountns`), each render laid out in
//! an empty `--config-dir` (docs/checking.md, "Without namespaces"), where
//! Landlock, seccomp and the rlimits hold the check instead of a root of
//! its own. The cases that depend on that root are listed with why.

use crate::support::*;

/// Cases whose expectation is the root's own, not this world's
/// (docs/checking.md, "Without namespaces", says each). None of them is a
/// leak of the scene's secrets: every other case, and every check of the
/// secret, the token, files and processes, holds here too.
const THE_ROOTS_OWN: &[(&str, &str)] = &[
    // the host's own /etc/passwd, /etc/hosts, /etc/resolv.conf are granted
    // (name lookups need them), where a root shows stand-ins
    (
        "proc_self_root_passwd",
        "/proc/self/root leads to the host's root, whose granted passwd shows",
    ),
    ("double_slash_etc", "the host's passwd, not the names-and-ids stand-in"),
    ("passwd_is_names_and_ids", "the host's passwd, not the names-and-ids stand-in"),
    ("resolv_conf_and_hosts_are_stand_ins", "the host's hosts and resolv.conf"),
    // no user, UTS or mount namespace to apply them in
    ("accounts_dir_names_resolve", "--accounts cannot apply"),
    ("check_hostname_names_the_peer", "--check-hostname cannot apply"),
    ("tmp_is_scratch", "no scratch /tmp"),
    (
        "native_counts_no_host_pids",
        "no PID namespace: signal 0 tells host pids from absent ones (docs/checking.md)",
    ),
    // /dev/stdin leads to the check's stdin, /dev/null (granted): an empty
    // errorfile, as bare reads it with stdin from /dev/null; a root has no /dev/stdin
    ("dev_stdin_errorfile", "/dev/stdin is /dev/null here"),
    ("dev_stdin_serve", "/dev/stdin is /dev/null here"),
    // the render lies in the config directory, not under TMPDIR; and the
    // case names /etc/haproxy, which is not this test's config directory
    ("check_directory_is_private", "the render is in --config-dir, not TMPDIR"),
    ("config_dir_holds_the_render", "the case names /etc/haproxy; --config-dir is elsewhere here"),
];

#[test]
fn every_case_holds_in_the_config_dir_world() {
    for (name, _) in THE_ROOTS_OWN {
        assert!(crate::ALL.iter().any(|(n, _)| n == name), "{name} is no case of the suite");
    }
    let run = Run { mode: Mode::Default, disable: Some("mountns") };
    let mut failures = Vec::new();
    for (name, build) in crate::ALL {
        if THE_ROOTS_OWN.iter().any(|(n, _)| n == name) {
            continue;
        }
        let config_dir = tempfile::tempdir().unwrap();
        let path = config_dir.path().display().to_string();
        let r = attempt(name, *build, run, |spec| {
            if !spec.args.iter().any(|a| a == "--config-dir") {
                spec.args.extend(["--config-dir".to_owned(), path.clone()]);
            }
        });
        if let Err(e) = r {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} cases:\n{}", failures.len(), failures.join("\n\n"));
}
