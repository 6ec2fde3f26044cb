//! Hand-written cases that try to talk the gate into a verdict bare HAProxy
//! would not give: silencing HAProxy (`quiet` in every spelling), forging
//! its lines (`.notice`/`.warning`/`.alert` with `\n`, Lua's `print`),
//! slipping user and group names past the sandbox's rewrite (quotes,
//! glued comments, escapes, environment variables), odd bytes and line
//! endings, the "no listener" exit, and files found through `default-path`.

use crate::case::{Case, ORIGIN};
use crate::sides::Kind;

const DEFAULTS: &str = "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n";
const BACKEND: &str = "backend b\n    server s 127.0.0.1:8080\n";
/// A line HAProxy refuses in a frontend (after parsing, in its checks).
const MISSING: &str = "    use_backend missing if { path /x }\n";

/// A valid config with `global` lines and frontend lines added.
fn with(global: &str, frontend: &str) -> String {
    format!(
        "global\n{global}{DEFAULTS}frontend f\n    bind 127.0.0.1:18080\n{frontend}    default_backend b\n{BACKEND}"
    )
}

fn valid(global: &str) -> String {
    with(global, "")
}

fn refused(global: &str) -> String {
    with(global, MISSING)
}

/// Valid, but no frontend: HAProxy exits 2.
fn no_listener(global: &str) -> String {
    format!("global\n{global}{DEFAULTS}{BACKEND}")
}

/// A backend that earns one `[WARNING]` on every version, with or without
/// timeouts in `defaults` (a backend has no use for a client timeout).
const WARNS: &str = "backend warns\n    server s 127.0.0.1:8081\n    timeout client 5s\n";

fn case(name: &str, config: String) -> Case {
    Case::new(name, config)
}

pub fn cases(lua: bool) -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(quiet());
    cases.extend(forged_lines());
    cases.extend(users());
    cases.extend(bytes());
    cases.extend(listeners());
    cases.extend(files());
    if lua {
        cases.extend(lua_cases());
    }
    cases
}

fn quiet() -> Vec<Case> {
    vec![
        case("quiet-valid", valid("    quiet\n")),
        case("quiet-refused", refused("    quiet\n")),
        case("quiet-with-arg", refused("    quiet 1\n")),
        case("quiet-twice-refused", refused("    quiet\n    quiet\n")),
        case("quiet-in-defaults", refused("").replacen("defaults\n", "defaults\n    quiet\n", 1)),
        case("quiet-in-frontend", with("", "    quiet\n")),
        case("quiet-in-backend", format!("{}    quiet\n", valid(""))),
        case("quiet-inside-if-true", refused(".if 1\n    quiet\n.endif\n")),
        case("quiet-inside-if-false", refused(".if 0\n    quiet\n.endif\n")),
        case("quiet-inside-if-version", refused(".if version_atleast(1.0)\n    quiet\n.endif\n")),
        case("quiet-double-quoted", refused("    \"quiet\"\n")),
        case("quiet-single-quoted", refused("    'quiet'\n")),
        case("quiet-hex-escaped", refused("    \\x71uiet\n")),
        case("quiet-split-quotes", refused("    qu\"ie\"t\n")),
        case("quiet-via-setenv-quoted", refused("    setenv Q quiet\n    \"${Q}\"\n")),
        case("quiet-via-setenv-bare", refused("    setenv Q quiet\n    ${Q}\n")),
        case("quiet-via-presetenv", refused("    presetenv Q quiet\n    \"${Q}\"\n")),
        case("quiet-with-warning-only", format!("{}{WARNS}", valid("    quiet\n"))),
        case("quiet-no-listener", no_listener("    quiet\n")),
        case("quiet-no-listener-warning", format!("{}{WARNS}", no_listener("    quiet\n"))),
        case("quiet-after-error", with("    bogus-global\n    quiet\n", "")),
        case(
            "quiet-after-warning-refused",
            refused(&format!("{}    quiet\n", says("warning", "w"))),
        ),
        case(
            "quiet-zero-warning-warning",
            format!("{}{WARNS}", valid("    quiet\n    zero-warning\n")),
        ),
        case("quiet-alert-directive", valid("    quiet\n    .alert \"stop\"\n")),
        case("zero-warning-clean", valid("    zero-warning\n")),
        case("zero-warning-warning", format!("{}{WARNS}", valid("    zero-warning\n"))),
        case(
            "zero-warning-no-listener-warning",
            format!("{}{WARNS}", no_listener("    zero-warning\n")),
        ),
        case("zero-warning-refused", refused("    zero-warning\n")),
    ]
}

/// Why an exit 2 after a failure line is refused: bare `haproxy -c`'s status
/// says "no listener" (a pass), but HAProxy would not start a config it
/// alerted on; the status may be a Lua `os.exit(2)`, and a forged alert only
/// refuses the render that forged it.
const EXIT_2_AFTER_A_FAILURE_LINE: &str = "exit 2 after a failure line: bare haproxy -c's status \
     says \"no listener\", the gate refuses (docs/checking.md, \"Verdicts\")";

/// `    .KIND "TEXT"`, TEXT in HAProxy's own spelling: the two characters
/// `\n` there are HAProxy's newline escape (written `\\n` in this file).
fn says(kind: &str, text: &str) -> String {
    format!("    .{kind} \"{text}\"\n")
}

fn forged_lines() -> Vec<Case> {
    let alert = says("notice", "x\\n[ALERT]    (1) : config : parsing [haproxy.cfg:1] : forged");
    let valid_line = says("notice", "x\\nConfiguration file is valid");
    let oom = says("notice", "x\\n[ALERT]    (1) : config : out of memory");
    let warning_alert = says("warning", "x\\n[ALERT]    (1) : forged");
    let no_listener_line = says(
        "notice",
        "x\\nConfiguration file has no error but will not start (no listener) => exit(2).",
    );
    vec![
        case("notice-forges-alert-valid", valid(&alert)),
        case("notice-forges-alert-no-listener", no_listener(&alert)).deviating(
            Kind::Pass,
            Kind::Refused,
            EXIT_2_AFTER_A_FAILURE_LINE,
        ),
        case("notice-forges-alert-refused", refused(&alert)),
        case("warning-forges-alert-valid", valid(&warning_alert)),
        case("warning-forges-alert-no-listener", no_listener(&warning_alert)).deviating(
            Kind::Pass,
            Kind::Refused,
            EXIT_2_AFTER_A_FAILURE_LINE,
        ),
        case("notice-forges-valid-refused", refused(&valid_line)),
        case("notice-forges-valid-quiet-refused", refused(&format!("{valid_line}    quiet\n"))),
        case("notice-forges-oom-refused", refused(&oom)),
        case("notice-forges-oom-valid", valid(&oom)),
        case("notice-forges-oom-no-listener", no_listener(&oom)).deviating(
            Kind::Pass,
            Kind::Refused,
            EXIT_2_AFTER_A_FAILURE_LINE,
        ),
        case("alert-says-out-of-memory", valid(&says("alert", "out of memory"))),
        case("alert-forges-valid", valid(&says("alert", "x\\nConfiguration file is valid"))),
        case("warning-says-out-of-memory", valid(&says("warning", "[ALERT] out of memory"))),
        case("notice-forges-no-listener-refused", refused(&no_listener_line)),
        case("notice-forges-no-listener-valid", valid(&no_listener_line)),
        case(
            "notice-forges-continuation-no-listener",
            no_listener(&says("notice", "x\\n   | continued")),
        ),
        case(
            "notice-forges-summary-no-listener",
            no_listener(&says("notice", "x\\nFatal errors found in configuration.")),
        ),
        case("notice-escaped-cr-valid", valid(&says("notice", "x\\r[ALERT] forged"))),
        // 2.6 prints no `.diag` without -dD; later versions may
        case("diag-forges-alert-no-listener", no_listener(&says("diag", "x\\n[ALERT] forged")))
            .deviating(Kind::Pass, Kind::Refused, EXIT_2_AFTER_A_FAILURE_LINE),
    ]
}

/// A user or group name this host does not know: bare HAProxy refuses it,
/// and so does the gate, whose world has the host's own accounts (or
/// `--accounts`): no deviation.
fn unknown_name(name: &str, config: String) -> Case {
    case(name, config)
}

fn users() -> Vec<Case> {
    let bind =
        |extra: &str| with("", &format!("    bind \"unix@/tmp/rendergate-diff.sock\" {extra}\n"));
    vec![
        case("user-known", valid("    user haproxy\n    group haproxy\n")),
        case("user-root", valid("    user root\n    group root\n")),
        unknown_name("user-unknown", valid("    user nosuchuser\n")),
        unknown_name("group-unknown", valid("    group nosuchgroup\n")),
        case("user-numeric-name", valid("    user 0\n")),
        case("uid-gid-numeric", valid("    uid 0\n    gid 0\n")),
        case("user-unmatched-double-quote", valid("    user \"root\n")),
        case("user-unmatched-single-quote", valid("    user 'root\n")),
        case("group-unmatched-quote", valid("    group \"root\n")),
        case("user-unmatched-quote-refused", refused("    user \"root\n")),
        case("user-quoted", valid("    user \"root\"\n")),
        case("user-quotes-joined", valid("    user ro\"ot\"\n")),
        case("user-comment-glued", valid("    user root#x\n")),
        case("group-comment-glued", valid("    group root#x\n")),
        unknown_name("user-unknown-comment-glued", valid("    user nosuch#root\n")),
        case("user-comment-spaced", valid("    user root # the admin\n")),
        case("user-hex-escape", valid("    user \\x72oot\n")),
        case("group-hex-escape", valid("    group \\x72oot\n")),
        unknown_name("user-backslash-escape", valid("    user r\\oot\n")),
        case("user-from-env", valid("    setenv U root\n    user \"${U}\"\n")),
        unknown_name(
            "user-from-env-unknown",
            valid("    setenv U nosuchuser\n    user \"${U}\"\n"),
        ),
        case("user-two-args", valid("    user root extra\n")),
        case(
            "user-in-userlist",
            format!(
                "{}userlist L\n    group admins users admin\n    user admin insecure-password x\n",
                valid("")
            ),
        ),
        case(
            "user-in-userlist-unmatched-quote",
            format!("{}userlist L\n    user \"admin insecure-password x\n", valid("")),
        ),
        case(
            "user-in-userlist-unknown-group",
            format!("{}userlist L\n    user admin insecure-password x groups nosuch\n", valid("")),
        ),
        case("user-in-backend", format!("{}    user root\n", valid(""))),
        case(
            "stats-socket-user",
            valid("    stats socket /tmp/rendergate-diff.sock user root group root mode 600\n"),
        ),
        unknown_name(
            "stats-socket-user-unknown",
            valid("    stats socket /tmp/rendergate-diff.sock user nosuchuser\n"),
        ),
        case(
            "stats-socket-user-unmatched-quote",
            valid("    stats socket /tmp/rendergate-diff.sock user \"root\n"),
        ),
        case(
            "stats-socket-user-hex",
            valid("    stats socket /tmp/rendergate-diff.sock user \\x72oot\n"),
        ),
        case(
            "stats-socket-quoted-path-user",
            valid("    stats socket \"/tmp/rendergate diff.sock\" user root group root\n"),
        ),
        case("unix-bind-user-group", valid("    unix-bind prefix /tmp user root group root\n")),
        case(
            "unix-bind-quoted-prefix-user",
            valid("    unix-bind prefix \"/tmp/a b\" user root group root mode 600\n"),
        ),
        unknown_name(
            "unix-bind-user-unknown",
            valid("    unix-bind prefix /tmp user nosuchuser\n"),
        ),
        case(
            "unix-bind-user-comment-glued",
            valid("    unix-bind prefix /tmp user root#x group root\n"),
        ),
        case("unix-bind-group-hex", valid("    unix-bind prefix /tmp group \\x72oot\n")),
        case("bind-user", bind("user root group root mode 600")),
        unknown_name("bind-user-unknown", bind("user nosuchuser")),
        case("bind-user-unmatched-quote", bind("user \"root")),
        case("bind-user-hex", bind("user \\x72oot")),
        case("bind-user-comment-glued", bind("user root#x")),
        case(
            "bind-quoted-args-user",
            with("", "    bind \"unix@/tmp/a b.sock\" \"mode\" \"600\" user root\n"),
        ),
        case("bind-inet-user", with("", "    bind 127.0.0.1:18081 user root\n")),
    ]
}

fn bytes() -> Vec<Case> {
    let long_acl: String = (0..4000).map(|i| format!(" /p{i}")).collect();
    let long_word = "x".repeat(100_000);
    let crlf = |text: String| text.replace('\n', "\r\n");
    vec![
        case("crlf-valid", crlf(valid(""))),
        case("crlf-refused", crlf(refused(""))),
        case("crlf-user-root", crlf(valid("    user root\n"))),
        case("crlf-user-unmatched-quote", crlf(valid("    user \"root\n"))),
        case("crlf-quiet-refused", crlf(refused("    quiet\n"))),
        case("cr-only", valid("").replace('\n', "\r")),
        case("nul-in-line", valid("    maxconn 10\0 bogus\n")),
        case("nul-after-user", valid("    user root\0x\n")),
        case("nul-at-end", format!("{}\0\n", valid(""))),
        case("no-final-newline", valid("").trim_end().to_owned()),
        case("utf8-bom", format!("\u{feff}{}", valid(""))),
        case("utf8-in-comment", valid("    # préférence — ok\n")),
        case(
            "long-line-valid",
            with("", &format!("    http-request set-header X-Long {long_word}\n")),
        ),
        case(
            "long-line-error-at-end",
            with("", &format!("    http-request set-header X-Long {long_word} bogus\n")),
        ),
        case(
            "long-line-many-words",
            with("", &format!("    http-request deny if {{ path{long_acl} }}\n")),
        ),
        case("long-comment", valid(&format!("    #{}\n", "x".repeat(100_000)))),
        case(
            "too-many-words",
            with("", &format!("    http-request deny if {{ path{} }}\n", " /x".repeat(80))),
        ),
        case("tab-indented", valid("\tmaxconn 10\n")),
    ]
}

fn listeners() -> Vec<Case> {
    vec![
        case("no-listener", no_listener("")),
        case("no-listener-one-warning", format!("{}{WARNS}", no_listener(""))),
        case(
            "no-listener-two-warnings",
            format!("{}{WARNS}{}", no_listener(""), WARNS.replace("warns", "warns2")),
        ),
        case("no-listener-warning-directive", no_listener(&says("warning", "deliberate"))),
        case(
            "no-listener-no-defaults",
            "global\nbackend b\n    server s 127.0.0.1:8080\n".to_owned(),
        ),
        case("no-listener-refused", format!("{}    bogus-keyword\n", no_listener(""))),
        case(
            "no-listener-missing-backend",
            format!("{}listen l\n    use_backend missing\n", no_listener("")),
        ),
        case("only-global", "global\n".to_owned()),
        case("empty-config", String::new()),
        case(
            "listen-without-bind",
            format!("{}listen l\n    server s 127.0.0.1:8083\n", no_listener("")),
        ),
        case("disabled-frontend", with("", "    disabled\n")),
    ]
}

fn files() -> Vec<Case> {
    let hosts = "example.com b\nexample.org b\n";
    let map_line = |path: &str| {
        format!("    http-request set-header X-Route %[req.hdr(host),lower,map({path},none)]\n")
    };
    vec![
        case("map-relative", with("", &map_line("maps/hosts.map")))
            .with_file("maps/hosts.map", hosts),
        case("map-relative-missing", with("", &map_line("maps/hosts.map"))),
        case(
            "map-default-path-config",
            with("    default-path config\n", &map_line("maps/hosts.map")),
        )
        .with_file("maps/hosts.map", hosts),
        case(
            "map-default-path-origin",
            with(&format!("    default-path origin {ORIGIN}\n"), &map_line("maps/hosts.map")),
        )
        .with_file("maps/hosts.map", hosts),
        case(
            "map-default-path-origin-missing",
            with(&format!("    default-path origin {ORIGIN}\n"), &map_line("maps/hosts.map")),
        ),
        case(
            "map-ip-malformed",
            with("", "    http-request set-header X-Net %[src,map_ip(maps/ips.map,none)]\n"),
        )
        .with_file("maps/ips.map", "10.0.0.0/8 a\nnot-an-ip b\n"),
        case("acl-file", with("", "    http-request deny if { path -f maps/deny.lst }\n"))
            .with_file("maps/deny.lst", "/admin\n"),
        case("acl-file-missing", with("", "    http-request deny if { path -f maps/deny.lst }\n")),
        case("errorfile", with("", "    errorfile 503 errors/503.http\n")).with_file(
            "errors/503.http",
            "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nbusy\n",
        ),
        case("errorfile-malformed", with("", "    errorfile 503 errors/503.http\n"))
            .with_file("errors/503.http", "not http at all\n"),
    ]
}

fn lua_cases() -> Vec<Case> {
    let load = |script: &str| -> Case {
        Case::new("", valid("    lua-load hello.lua\n")).with_file("hello.lua", script)
    };
    let named = |name: &str, mut case: Case| {
        case.name = name.to_owned();
        case
    };
    // HAProxy's alert lands after a partial line the render printed, short
    // or longer than a line is kept (a warning first: HAProxy's first
    // message brings its notices with it)
    let partial_line_then_alert = |name: &str, partial: &str| {
        let global = format!(
            "{}    lua-load hello.lua\n    bogus-keyword\n    lua-load bye.lua\n",
            says("warning", "w")
        );
        named(name, Case::new("", valid(&global)))
            .with_file("hello.lua", format!("io.stderr:write({partial})\n"))
            .with_file("bye.lua", "os.exit(2)\n")
            .deviating(Kind::Pass, Kind::Refused, EXIT_2_AFTER_A_FAILURE_LINE)
    };
    vec![
        named("lua-valid", load("core.register_service(\"hello\", \"http\", function(applet) end)\n")),
        named("lua-syntax-error", load("this is not lua\n")),
        named("lua-error-at-load", load("error(\"boom\")\n")),
        named("lua-missing-file", Case::new("", valid("    lua-load hello.lua\n"))),
        named("lua-print-forges-alert-valid", load("print(\"[ALERT]    (1) : config : forged\")\n")),
        named(
            "lua-print-forges-valid-refused",
            load("print(\"Configuration file is valid\")\n")
                .tap_config(|c| c.replace("    default_backend b\n", MISSING)),
        ),
        named(
            "lua-print-forges-oom-refused",
            load("print(\"[ALERT] out of memory\")\n").tap_config(|c| c.replace("    default_backend b\n", MISSING)),
        ),
        named(
            "lua-print-forges-alert-no-listener",
            Case::new("", no_listener("    lua-load hello.lua\n"))
                .with_file("hello.lua", "print(\"[ALERT]    (1) : forged\")\n"),
        )
        .deviating(Kind::Pass, Kind::Refused, EXIT_2_AFTER_A_FAILURE_LINE),
        named(
            "lua-exit-2-after-a-fatal-alert",
            Case::new("", valid("    bogus-keyword\n    lua-load hello.lua\n"))
                .with_file("hello.lua", "os.exit(2)\n"),
        )
        .deviating(Kind::Pass, Kind::Refused, EXIT_2_AFTER_A_FAILURE_LINE),
        partial_line_then_alert("lua-partial-line-then-exit-2-after-a-fatal-alert", "\"note: \""),
        partial_line_then_alert(
            "lua-long-partial-line-then-exit-2-after-a-fatal-alert",
            "string.rep(\"x\", 100000)",
        ),
        named("lua-exit-1-valid", load("os.exit(1)\n")).deviating(
            Kind::Refused,
            Kind::CouldNotRun,
            "HAProxy exits 1 without a word: under -V HAProxy always says why it refuses, so a silent \
             exit is not a judgement the gate can show, and it never reverts a fleet on one",
        ),
        named(
            "lua-exit-1-after-warning",
            load("os.exit(1)\n")
                .tap_config(|c| c.replacen("global\n", &format!("global\n{}", says("warning", "w")), 1)),
        ),
        named("lua-exit-0-refused", load("os.exit(0)\n").tap_config(|c| c.replace("    default_backend b\n", MISSING))),
    ]
}

trait TapConfig {
    fn tap_config(self, edit: impl FnOnce(&str) -> String) -> Self;
}

impl TapConfig for Case {
    fn tap_config(mut self, edit: impl FnOnce(&str) -> String) -> Case {
        self.config = edit(&self.config_text()).into_bytes();
        self
    }
}
