//! The check's world through the real binary: the configs the old sandbox
//! judged wrongly (false refusals of ordinary configs, forged passes through
//! rewrites) get bare `haproxy -dr -c`'s kind, through `check` and through
//! `serve` alike (docs/checking.md, "The check's world").

use crate::support::*;
use serde_json::json;
use std::path::Path;
use std::process::Command;

/// A valid config around `global_extra` (whole lines), `frontend_extra` and
/// `tail` (whole sections).
fn config(global_extra: &str, frontend_extra: &str, tail: &str) -> String {
    format!(
        "global\n{global_extra}defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
frontend www\n  bind 127.0.0.1:18080\n{frontend_extra}{tail}"
    )
}

struct Case {
    name: &'static str,
    config: String,
    /// Files at relative paths (text).
    files: Vec<(&'static str, &'static str)>,
    /// The kind a pod's world gives where bare on this host cannot be the
    /// reference (an absolute path under the config directory): `None`
    /// compares with bare.
    expect: Option<&'static str>,
}

fn case(name: &'static str, config: String) -> Case {
    Case { name, config, files: vec![], expect: None }
}

fn cases() -> Vec<Case> {
    let mut cases = vec![
        case("log localhost", config("  log localhost:514 local0\n", "", "")),
        case("bind localhost", config("", "  bind localhost:18081\n", "")),
        case(
            "errorfile /dev/null",
            config("", "", "backend b\n  errorfile 408 /dev/null\n  server s 127.0.0.1:80\n"),
        ),
        case(
            "ca-file by path",
            config(
                "",
                "",
                "backend b\n  server s 127.0.0.1:8443 ssl verify required ca-file /etc/ssl/certs/ca-certificates.crt\n",
            ),
        ),
        case(
            "@system-ca spelled with quotes",
            config(
                "",
                "",
                "backend b\n  server s 127.0.0.1:8443 ssl verify required ca-file @sys\"tem\"-ca\n",
            ),
        ),
        case("httpclient verify required", config("  httpclient.ssl.verify required\n", "", "")),
        case(
            "server named localhost under zero-warning",
            config("  zero-warning\n", "", "backend b\n  server localhost localhost:80\n"),
        ),
        case(
            "the default resolvers section",
            config(
                "",
                "",
                "backend b\n  server s app.invalid:80 resolvers default init-addr none\n",
            ),
        ),
        Case {
            name: "a resolvers nameserver at the cluster's DNS address under zero-warning",
            config: config(
                "  zero-warning\n",
                "",
                "resolvers dns\n  nameserver dns1 10.96.0.10:53\n",
            ),
            files: vec![],
            // a pod's network routes, so its UDP connect succeeds (bare's
            // here too, where this host has a route)
            expect: Some("pass"),
        },
        case(
            "localpeer",
            config("  localpeer here\n", "", "peers p\n  peer here 127.0.0.1:10000\n"),
        ),
        case(
            "an unknown user is refused as bare refuses",
            config("  user no-such-user-rg\n", "", ""),
        ),
        case("uid empty after user root", config("  user root\n  uid \"\"\n", "", "")),
        case(
            "global inside a false .if",
            format!(".if 0\nglobal\n.endif\n{}", config("  bogus-keyword\n", "", "")),
        ),
        case(
            "a vertical tab before defaults",
            config("", "", "").replace("defaults\n", "\u{b}defaults\n  bogus-keyword\n"),
        ),
        case(
            "a section header from a variable",
            config("  setenv SECTION global\n", "", "\"${SECTION}\"\n  bogus-keyword\n"),
        ),
        case(
            "more than 64 words",
            config(&format!("  user {}\n", vec!["w"; 70].join(" ")), "", ""),
        ),
        case(
            "the sandbox is not fingerprintable by LUA_PATH",
            config(".if defined(LUA_PATH)\n.else\n  bogus-keyword\n.endif\n", "", ""),
        ),
        Case {
            name: "absolute paths under the config directory resolve as on a pod",
            config: config(
                "  default-path origin /etc/haproxy\n",
                "  http-request set-header X-Host %[req.hdr(host),map(/etc/haproxy/maps/hosts.map)]\n",
                "",
            ),
            files: vec![("maps/hosts.map", "a.example b\n")],
            expect: Some("pass"),
        },
        Case {
            name: "stock error pages under the config directory",
            config: config("", "", "backend b\n  errorfile 503 /etc/haproxy/errors/503.http\n"),
            files: vec![],
            expect: Path::new("/etc/haproxy/errors/503.http").exists().then_some("pass"),
        },
    ];
    if let Ok(debian) = std::fs::read_to_string("/etc/haproxy/haproxy.cfg") {
        cases.push(case("the host's packaged default config", debian));
    }
    // HAProxy 3.x probes SO_REUSEPORT by binding two stream sockets, and
    // warns (fatal under zero-warning) when it cannot
    cases.push(case(
        "shards under zero-warning",
        config("  zero-warning\n  nbthread 2\n", "  bind 127.0.0.1:18082 shards 2\n", ""),
    ));
    // Names resolve as on a pod: through the gate host's resolver, which the
    // gate answers for the check. This host resolves a name of its
    // /etc/hosts that is not its own host name (which the world's
    // stand-in /etc/hosts holds anyway); `.invalid` nowhere.
    let name = host_short_name();
    cases.extend([
        case(
            "log to a name the host resolves",
            config(&format!("  log {name}:514 local0\n"), "", ""),
        ),
        case(
            "a server by a name the host resolves, under zero-warning",
            config("  zero-warning\n", "", &format!("backend b\n  server s {name}:80\n")),
        ),
        case(
            "log to a name nothing resolves",
            config("  log nowhere.invalid:514 local0\n", "", ""),
        ),
    ]);
    cases
}

/// A name of this host's /etc/hosts, one label, that is neither localhost
/// nor the host name: one only the host's resolver knows.
fn host_short_name() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let own = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
        hosts
            .lines()
            .flat_map(|l| l.split('#').next().unwrap().split_whitespace().skip(1))
            .find(|n| !n.contains('.') && !n.contains("localhost") && *n != own.trim())
            .expect("/etc/hosts names a host by one label beside the host name")
            .to_owned()
    })
}

/// Bare `haproxy -dr -c` in `dir` with an empty environment: its kind.
fn bare(dir: &Path) -> (&'static str, String) {
    let out = Command::new(real_haproxy())
        .args(["-dr", "-c", "-f", "haproxy.cfg"])
        .current_dir(dir)
        .env_clear()
        .output()
        .unwrap();
    let kind = match out.status.code() {
        Some(0 | 2) => "pass",
        Some(1) => "refused",
        _ => "could not run",
    };
    (
        kind,
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

fn kind_of(verdict: &serde_json::Value) -> &'static str {
    match (verdict["ok"].as_bool(), verdict["refused"].as_bool()) {
        (Some(true), _) => "pass",
        (_, Some(true)) => "refused",
        _ => "could not run",
    }
}

/// A case laid out on disk as a render directory.
fn laid_out(c: &Case) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), &c.config).unwrap();
    for (path, content) in &c.files {
        let at = dir.path().join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, content).unwrap();
    }
    dir
}

#[test]
fn ordinary_and_forging_configs_get_bare_haproxys_kind_through_check() {
    let mut disagreements = Vec::new();
    for c in cases() {
        let dir = laid_out(&c);
        let (bare_kind, bare_said) = bare(dir.path());
        let want = c.expect.unwrap_or(bare_kind);
        let out = run(
            &["check", "--json", "--haproxy", &haproxy(), dir.path().to_str().unwrap()],
            "",
            &[],
        );
        let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!("{}: no verdict ({e}): {}", c.name, String::from_utf8_lossy(&out.stderr))
        });
        if kind_of(&verdict) != want {
            disagreements.push(format!(
                "{}: check says {} ({}), want {want}; bare: {bare_kind}: {bare_said}",
                c.name,
                kind_of(&verdict),
                verdict["message"]
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n\n"));
}

#[test]
fn serve_judges_each_world_case_as_check_does() {
    // one serve, each render sent once the previous verdict is out
    let mut serve = Serve::start(&[]);
    for (i, c) in cases().iter().enumerate() {
        let dir = laid_out(c);
        let want = c.expect.unwrap_or_else(|| bare(dir.path()).0);
        let files: Vec<_> = c
            .files
            .iter()
            .map(|(path, content)| json!({"kind": "general", "path": path, "content": content}))
            .collect();
        serve.send(
            &json!({"type": "rendered", "plan": format!("plan-{i}"), "render": format!("r-{i}"),
                           "config": c.config, "files": files}),
        );
        let verdict = serve.until("verdict").pop().unwrap();
        assert_eq!(verdict["render"], format!("r-{i}"));
        assert_eq!(kind_of(&verdict), want, "{}: {verdict}", c.name);
    }
    let (_, status) = serve.finish();
    assert!(status.success());
}

/// Nothing of one check is there for the next (docs/checking.md, "Checks
/// made ahead"): a render whose Lua leaves a file in the scratch `/tmp` and
/// one in its config directory passes, naming both; the next render, which
/// only names them, is refused for want of them. Each check has a child,
/// a directory and a scratch of its own, made ahead of it.
#[test]
fn nothing_of_one_check_is_there_for_the_next() {
    let response = "HTTP/1.0 503 Service Unavailable\\r\\nContent-Length: 0\\r\\n\\r\\n";
    let lua = format!(
        "for _, path in ipairs({{'/tmp/rg-left.http', '/etc/haproxy/rg-left.http'}}) do\n  \
         local f = assert(io.open(path, 'w'))\n  f:write('{response}')\n  f:close()\nend\n"
    );
    let names = "backend left\n  errorfile 503 /tmp/rg-left.http\n  errorfile 504 /etc/haproxy/rg-left.http\n";
    let mut gate = Serve::start(&[]);
    let leaving = config("  lua-load lua/leave.lua\n", "", names);
    let files = json!([{"kind": "general", "path": "lua/leave.lua", "content": lua}]);
    gate.send(&json!({"type": "rendered", "plan": "plan-1", "render": "r-1", "config": leaving, "files": files}));
    let first = gate.until("verdict").pop().unwrap();
    assert_eq!(kind_of(&first), "pass", "the files are there within their own check: {first}");
    for round in 2..5 {
        let render = format!("r-{round}");
        gate.send(&rendered(&format!("plan-{round}"), &render, &config("", "", names)));
        let next = gate.until("verdict").pop().unwrap();
        assert_eq!(kind_of(&next), "refused", "{next}");
        assert!(next["message"].as_str().unwrap().contains("rg-left.http"), "{next}");
    }
    let (_, status) = gate.finish();
    assert!(status.success());
}

/// A pod's container has `/dev/shm`: a `ring`'s `backing-file` there passes,
/// as on the pod (bare is not run here: it would write into this host's
/// `/dev/shm`), and what HAProxy writes there is the check's own scratch,
/// gone with it, never the host's.
#[test]
fn a_ring_backed_by_a_file_in_dev_shm_passes_and_leaves_nothing_on_the_host() {
    let name = format!("rendergate-e2e-ring-{}.bin", std::process::id());
    // 1 MiB; and 32 MiB, past the first file-size bound (16 MiB): judged in
    // a second run under the larger one, as bare passes it
    for size in [1 << 20, 32 << 20] {
        let ring = format!(
            "ring r\n  format rfc3164\n  maxlen 1200\n  size {size}\n  backing-file /dev/shm/{name}\n"
        );
        let c = case("ring backing-file in /dev/shm", config("", "", &ring));
        let dir = laid_out(&c);
        let out = run(
            &["check", "--json", "--haproxy", &haproxy(), dir.path().to_str().unwrap()],
            "",
            &[],
        );
        let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(verdict["ok"], json!(true), "{size}: {verdict}");
        let second_run = verdict["message"].as_str().unwrap().starts_with(
            "the first run wrote a file past the check's file-size limit of 16MiB; under 256MiB it passed",
        );
        assert_eq!(second_run, size > 16 << 20, "{size}: {verdict}");
        assert!(
            !Path::new("/dev/shm").join(&name).exists(),
            "the check wrote into the host's /dev/shm"
        );
    }
}

/// The stand-ins follow their sources in a long-running `serve`: an account
/// added to `--accounts` after the start is known to the next check, and
/// one removed is no longer (docs/checking.md, "The check's world").
#[test]
fn an_account_added_or_removed_while_serve_runs_is_seen_by_the_next_check() {
    let accounts = tempfile::tempdir().unwrap();
    let write = |passwd: &str, group: &str| {
        std::fs::write(accounts.path().join("passwd"), passwd).unwrap();
        std::fs::write(accounts.path().join("group"), group).unwrap();
    };
    let base_passwd = "root:x:0:0:root:/root:/bin/sh\n";
    let base_group = "root:x:0:\n";
    write(base_passwd, base_group);
    let mut gate = Serve::start(&["--accounts", accounts.path().to_str().unwrap()]);
    let with_user = |round: usize| {
        format!("# round {round}\n{}", config("  user rg-late\n  group rg-late\n", "", ""))
    };
    let kinds = |gate: &mut Serve, round: usize| {
        gate.send(&rendered(&format!("plan-{round}"), &format!("r-{round}"), &with_user(round)));
        let verdict = gate.until("verdict").pop().unwrap();
        (verdict["ok"].as_bool(), verdict["refused"].as_bool(), verdict["message"].clone())
    };
    let (ok, refused, said) = kinds(&mut gate, 1);
    assert_eq!((ok, refused), (Some(false), Some(true)), "unknown at first: {said}");
    write(
        &format!("{base_passwd}rg-late:x:4242:4242::/nonexistent:/bin/false\n"),
        &format!("{base_group}rg-late:x:4242:\n"),
    );
    let (ok, _, said) = kinds(&mut gate, 2);
    assert_eq!(ok, Some(true), "added while serve ran: {said}");
    write(base_passwd, base_group);
    let (ok, refused, said) = kinds(&mut gate, 3);
    assert_eq!((ok, refused), (Some(false), Some(true)), "removed while serve ran: {said}");
    let (_, status) = gate.finish();
    assert!(status.success());
}

/// `check --explain` tells what a check finds (docs/checking.md, "The
/// check's world"): every read-only part, device and stand-in it lists is
/// there for a render's Lua to open, every scratch mount it lists takes a
/// file, and a host path it does not list (`/home`, `/root`) is not there.
#[test]
fn what_explain_shows_is_what_a_check_finds() {
    let explained = run(&["check", "--explain", "--haproxy", &haproxy()], "", &[]);
    assert!(explained.status.success(), "{explained:?}");
    let text = String::from_utf8_lossy(&explained.stdout).into_owned();
    let listed = |label: &str| -> Vec<String> {
        let line = text.lines().find_map(|l| l.trim_start().strip_prefix(label));
        let line = line.unwrap_or_else(|| panic!("no `{label}` line: {text}"));
        // each path, without what follows it in parentheses
        let paths = line.split_whitespace().filter(|word| word.starts_with('/'));
        let paths: Vec<String> = paths.map(str::to_owned).collect();
        assert!(!paths.is_empty(), "`{label}` lists nothing: {text}");
        paths
    };
    let shown = [listed("read-only:"), listed("devices:"), listed("stand-ins:")].concat();
    let scratch = listed("scratch:");
    // host paths a world never shows, unless on the way to a listed one (a
    // haproxy built under /var/tmp has /var on its way)
    let absent: Vec<String> = ["/var", "/home", "/root", "/srv", "/etc/shadow"]
        .iter()
        .filter(|p| !shown.iter().any(|s| Path::new(s).starts_with(p)))
        .map(|p| p.to_string())
        .collect();
    assert!(absent.len() >= 3, "{absent:?}: {text}");
    let quoted =
        |paths: &[String]| paths.iter().map(|p| format!("[[{p}]]")).collect::<Vec<_>>().join(", ");
    let lua = format!(
        "local missing, unwritable, extra = {{}}, {{}}, {{}}\n\
         for _, p in ipairs({{ {} }}) do if not io.open(p) then missing[#missing + 1] = p end end\n\
         for _, d in ipairs({{ {} }}) do\n  \
           local f = io.open(d .. '/rg-explained', 'w')\n  \
           if not (f and f:write('x') and f:close()) then unwritable[#unwritable + 1] = d end\n\
         end\n\
         for _, p in ipairs({{ {} }}) do\n  \
           local _, e = io.open(p) if not (e and e:find('No such file')) then extra[#extra + 1] = p end\n\
         end\n\
         error('missing=[' .. table.concat(missing, ' ') .. '] unwritable=[' .. table.concat(unwritable, ' ')\n  \
           .. '] extra=[' .. table.concat(extra, ' ') .. ']')\n",
        quoted(&shown),
        quoted(&scratch),
        quoted(&absent)
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("haproxy.cfg"),
        config("  lua-load lua/explained.lua\n", "", ""),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("lua")).unwrap();
    std::fs::write(dir.path().join("lua/explained.lua"), &lua).unwrap();
    let out =
        run(&["check", "--json", "--haproxy", &haproxy(), dir.path().to_str().unwrap()], "", &[]);
    let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = verdict["message"].as_str().unwrap_or_default();
    assert_eq!(verdict["refused"], json!(true), "{verdict}");
    assert!(message.contains("missing=[] unwritable=[] extra=[]"), "{message}");
}

/// The check's processes are its own (docs/checking.md, "The check's
/// world"): a PID namespace under an init of its own, where HAProxy is pid
/// 2, a cgroup namespace where its cgroup is `/`, and a `/proc` of that
/// namespace, in which no host process (this test, its parent) has an
/// entry, nor the init. A render's Lua reads them and raises what it found; through
/// `check` and through `serve` (whose child is made ahead).
#[test]
fn the_checks_processes_and_proc_are_its_own() {
    let host = [std::process::id(), std::os::unix::process::parent_id()];
    let lua = format!(
        "local function slurp(p) local f, e = io.open(p) if not f then return 'none: ' .. tostring(e) end\n\
         local s = f:read('a') f:close() return s end\n\
         local seen = {{}}\n\
         for _, pid in ipairs({{ {}, {} }}) do if io.open('/proc/' .. pid .. '/stat') then seen[#seen + 1] = pid end end\n\
         local cgroup = slurp('/proc/self/cgroup'):gsub('\\n', ';')\n\
         local open = {{}}\n\
         for pid = 1, 16 do if pid ~= 2 then for _, what in ipairs({{'mem', 'environ'}}) do\n\
           local f = io.open('/proc/' .. pid .. '/' .. what) if f then f:close() open[#open + 1] = pid .. ':' .. what end\n\
         end end end\n\
         error('stat=[' .. (slurp('/proc/self/stat'):match('^%S+ %S+') or 'none') .. '] init=['\n\
           .. (slurp('/proc/1/stat'):match('^%S+') or 'none') .. '] cgroup=[' .. cgroup .. '] host=['\n\
           .. table.concat(seen, ',') .. '] memory=[' .. table.concat(open, ',') .. ']')\n",
        host[0], host[1]
    );
    let render = config("  lua-load lua/proc.lua\n", "", "");
    let found = |message: &str| {
        let field = |name: &str| {
            let from =
                message.find(&format!("{name}=[")).unwrap_or_else(|| panic!("{name}: {message}"));
            let rest = &message[from + name.len() + 2..];
            rest[..rest.find(']').unwrap()].to_owned()
        };
        assert_eq!(field("stat"), "2 (haproxy)", "{message}");
        // the init is there (HAProxy is pid 2) but hidden: HAProxy may not
        // trace it, and its mountinfo would show the host's mounts
        assert_eq!(field("init"), "none:", "{message}");
        assert_eq!(field("host"), "", "host processes seen: {message}");
        // the init and the keeper are copies of the gate: their memory and
        // environment are not HAProxy's to read
        assert_eq!(
            field("memory"),
            "",
            "another process's memory or environment opened: {message}"
        );
        let cgroup = field("cgroup");
        assert!(
            !cgroup.is_empty()
                && cgroup.split(';').filter(|l| !l.is_empty()).all(|l| l.ends_with(":/")),
            "the cgroup path is not the namespace's root: {message}"
        );
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("haproxy.cfg"), &render).unwrap();
    std::fs::create_dir(dir.path().join("lua")).unwrap();
    std::fs::write(dir.path().join("lua/proc.lua"), &lua).unwrap();
    let out =
        run(&["check", "--json", "--haproxy", &haproxy(), dir.path().to_str().unwrap()], "", &[]);
    let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verdict["refused"], json!(true), "{verdict}");
    found(verdict["message"].as_str().unwrap());

    let mut gate = Serve::start(&[]);
    let files = json!([{"kind": "general", "path": "lua/proc.lua", "content": lua}]);
    gate.send(&json!({"type": "rendered", "plan": "plan-1", "render": "r-1", "config": render, "files": files}));
    let verdict = gate.until("verdict").pop().unwrap();
    assert_eq!(kind_of(&verdict), "refused", "{verdict}");
    found(verdict["message"].as_str().unwrap());
    // the check's root is a tmpfs of its own: its mount names no gate
    // directory, never the gate's pid
    let mounts = "error((io.open('/proc/self/mountinfo'):read('a'):gsub('\\n', ';')))\n";
    let files = json!([{"kind": "general", "path": "lua/proc.lua", "content": mounts}]);
    gate.send(&json!({"type": "rendered", "plan": "plan-2", "render": "r-2", "config": render, "files": files}));
    let verdict = gate.until("verdict").pop().unwrap();
    let message = verdict["message"].as_str().unwrap();
    assert!(message.contains(" / / ro,nosuid,nodev,"), "no mounts read: {message}");
    assert!(message.contains("- tmpfs tmpfs rw,size=16384k"), "the root is no tmpfs: {message}");
    assert!(!message.contains("rendergate-"), "the gate's directory shows: {message}");
    let pid = gate.pid();
    assert!(
        !message.contains(&format!("/{pid}.")) && !message.contains(&format!(".{pid}.")),
        "the gate's pid {pid} in the check's mounts: {message}"
    );
    // and the render is a tmpfs of the check's own, not a directory of the
    // gate's bound there (whose host path the mount would name)
    let render_mount = "local t = {}\nfor line in io.lines('/proc/self/mountinfo') do if line:find(' /etc/haproxy ', 1, true) then t[#t + 1] = line end end\nerror('RENDER-MOUNT ' .. table.concat(t, ' ;; '))\n";
    let files = json!([{"kind": "general", "path": "lua/proc.lua", "content": render_mount}]);
    gate.send(&json!({"type": "rendered", "plan": "plan-3", "render": "r-3", "config": render, "files": files}));
    let verdict = gate.until("verdict").pop().unwrap();
    let message = verdict["message"].as_str().unwrap();
    let line = message.split("RENDER-MOUNT ").nth(1).unwrap_or_else(|| panic!("{message}"));
    let line = line.lines().next().unwrap_or_default();
    assert!(line.contains(" / /etc/haproxy rw,nosuid,nodev"), "the render's mount: {line}");
    assert!(line.contains(" - tmpfs tmpfs rw,size=458752k"), "the render's mount: {line}");
    assert!(!line.contains(";;"), "one mount at /etc/haproxy: {line}");
    let (_, status) = gate.finish();
    assert!(status.success());
}

/// `--check-hosts FILE`: the pods' own names (their `hostAliases`) resolve
/// in the check; without it, the same render is refused as a pod without
/// them would refuse it.
#[test]
fn check_hosts_adds_the_pods_own_names() {
    let dir = tempfile::tempdir().unwrap();
    let render = config("  log pod-alias.rendergate.invalid:514 local0\n", "", "");
    std::fs::write(dir.path().join("haproxy.cfg"), render).unwrap();
    let hosts = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        hosts.path(),
        "# the pods' hostAliases\n10.1.2.3\tpod-alias.rendergate.invalid\n",
    )
    .unwrap();
    let kind = |extra: &[&str]| {
        let mut args = vec!["check", "--json", "--haproxy"];
        let binary = haproxy();
        args.push(&binary);
        args.extend(extra);
        args.push(dir.path().to_str().unwrap());
        let out = run(&args, "", &[]);
        let verdict: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (kind_of(&verdict), verdict)
    };
    let (with, verdict) = kind(&["--check-hosts", hosts.path().to_str().unwrap()]);
    assert_eq!(with, "pass", "{verdict}");
    let (without, verdict) = kind(&[]);
    assert_eq!(without, "refused", "{verdict}");
    let missing = run(
        &["check", "--check-hosts", "/nonexistent/hosts", dir.path().to_str().unwrap()],
        "",
        &[],
    );
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--check-hosts"), "{missing:?}");
}
