#!/usr/bin/env python3
"""Writes the two seccomp profiles tests/container/run.sh runs the image under,
both derived from podman's own default profile (/usr/share/containers/seccomp.json,
which CRI-O also applies for RuntimeDefault):

  podman.json           podman's profile as is, except that every SCMP_ACT_ERRNO
                        rule names its errno (errnoRet) explicitly (EPERM where it
                        had none, which is what runc makes of none): a rule's
                        errno must not depend on whether a runtime version fills
                        it in from the profile's defaultErrnoRet. The default
                        action keeps the profile's defaultErrnoRet (ENOSYS; run.sh
                        probes that the runtime applied it).

  runtime-default.json  DERIVED, NOT COPIED: containerd's and Docker's
                        RuntimeDefault (moby's profiles/seccomp/default.json;
                        containerd's contrib/seccomp is the same list), which
                        the pod in examples/deploy/kubernetes.yaml gets on most
                        clusters. No registry or upstream checkout is reachable
                        from CI, so it is podman's list with moby's namespace
                        rules put in, which is where the two differ for the gate:
                        - unshare, setns, mount, umount, umount2, pivot_root,
                          sethostname, setdomainname, bpf, open_tree, move_mount,
                          fsopen, fsconfig, fsmount, fspick (and mount_setattr,
                          quotactl_fd, syslog, as moby) are allowed only with
                          CAP_SYS_ADMIN; chroot only with CAP_SYS_CHROOT;
                        - clone is allowed without CAP_SYS_ADMIN only when no
                          CLONE_NEW* flag is set (arg 0 masked by 2114060288
                          equals 0; arg 1 on s390);
                        - clone3 fails with ENOSYS (38) without CAP_SYS_ADMIN, so
                          glibc falls back to clone;
                        - everything not allowed fails with EPERM (moby's
                          defaultErrnoRet 1; containerd's default ERRNO action
                          has no errno, which is EPERM too), where podman's
                          profile says ENOSYS.
                        With `--cap-drop ALL` (kubernetes.yaml drops every
                        capability) the gate therefore gets no user namespace
                        (unshare: EPERM) and must fall back to the
                        config-directory world.

  localhost.json        the deployment kit's Localhost profile, as an operator
                        writes it (examples/deploy/README.md): runtime-default
                        plus exactly what the gate's root world needs of a
                        process without capabilities: unshare, clone with
                        CLONE_NEW* flags, mount, umount2 and pivot_root (no
                        chroot, no sethostname: the gate does without them).
                        Under it the gate must claim world=root.
Usage: seccomp.py PODMAN_PROFILE OUT_DIR
"""

import copy
import json
import sys

EPERM = 1
ENOSYS = 38

# moby: allowed only with CAP_SYS_ADMIN (the namespace and mount calls among them)
SYS_ADMIN_ONLY = [
    "bpf",
    "fanotify_init",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "quotactl",
    "quotactl_fd",
    "setdomainname",
    "sethostname",
    "setns",
    "syslog",
    "umount",
    "umount2",
    "unshare",
]
CLONE_NEW_MASK = 2114060288  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET


def explicit_errnos(profile):
    """Every ERRNO rule with its errno written out (EPERM, the OCI meaning of none)."""
    for rule in profile["syscalls"]:
        if rule["action"] == "SCMP_ACT_ERRNO" and rule.get("errnoRet") is None:
            rule["errnoRet"] = EPERM
    return profile


def runtime_default(podman):
    profile = copy.deepcopy(podman)
    profile["defaultAction"] = "SCMP_ACT_ERRNO"
    profile["defaultErrnoRet"] = EPERM
    profile.pop("defaultErrno", None)
    gated = set(SYS_ADMIN_ONLY) | {"clone", "clone3", "chroot"}
    rules = []
    for rule in profile["syscalls"]:
        names = [n for n in rule["names"] if n not in gated]
        if not names:
            continue
        rule["names"] = names
        rules.append(rule)
    rules += [
        {"names": SYS_ADMIN_ONLY + ["clone", "clone3"], "action": "SCMP_ACT_ALLOW", "args": [],
         "includes": {"caps": ["CAP_SYS_ADMIN"]}, "excludes": {}},
        {"names": SYS_ADMIN_ONLY, "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM, "args": [],
         "includes": {}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 0, "value": CLONE_NEW_MASK, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
         "includes": {}, "excludes": {"caps": ["CAP_SYS_ADMIN"], "arches": ["s390", "s390x"]}},
        {"names": ["clone"], "action": "SCMP_ACT_ALLOW",
         "args": [{"index": 1, "value": CLONE_NEW_MASK, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}],
         "includes": {"arches": ["s390", "s390x"]}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS, "args": [],
         "includes": {}, "excludes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["chroot"], "action": "SCMP_ACT_ALLOW", "args": [],
         "includes": {"caps": ["CAP_SYS_CHROOT"]}, "excludes": {}},
        {"names": ["chroot"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM, "args": [],
         "includes": {}, "excludes": {"caps": ["CAP_SYS_CHROOT"]}},
    ]
    profile["syscalls"] = rules
    return explicit_errnos(profile)


# What the root world needs beyond containerd's RuntimeDefault (docs/checking.md,
# "Which world checks get"): the kit's Localhost profile adds exactly these.
ROOT_WORLD = ["unshare", "clone", "mount", "umount2", "pivot_root"]


def localhost(runtime_default_profile):
    profile = copy.deepcopy(runtime_default_profile)
    profile["syscalls"].append({"names": ROOT_WORLD, "action": "SCMP_ACT_ALLOW", "args": [],
                                "includes": {}, "excludes": {}})
    return profile


def check(profile, name):
    """The namespace calls are where this file says, or the derivation is stale."""
    unconditional = {n for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW"
                     and not r.get("args") and not r.get("includes") for n in r["names"]}
    leaked = unconditional & (set(SYS_ADMIN_ONLY) | {"clone", "clone3", "chroot"})
    if leaked:
        sys.exit(f"seccomp.py: {name} still allows {sorted(leaked)} unconditionally")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        podman = json.load(f)
    for key in ("defaultAction", "syscalls"):
        if key not in podman:
            sys.exit(f"seccomp.py: {sys.argv[1]} has no {key}: not a seccomp profile")
    derived = runtime_default(podman)
    check(derived, "runtime-default.json")
    for name, profile in (("podman.json", explicit_errnos(copy.deepcopy(podman))),
                          ("runtime-default.json", derived),
                          ("localhost.json", localhost(derived))):
        with open(f"{sys.argv[2]}/{name}", "w") as f:
            json.dump(profile, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
