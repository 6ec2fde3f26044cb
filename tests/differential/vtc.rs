//! Reading a vtest script (`reg-tests/**/*.vtc`) for what the regression
//! corpus needs: every `haproxy NAME … -conf {…}` block (`-conf-OK {…}`,
//! and `-conf-BAD {expected} {…}`, whose config is the second block), the
//! `-arg` values given to that instance, and what the script requires of
//! the haproxy it runs (`feature cmd "…"`, `#REQUIRE_VERSION=`, …).
//!
//! vtest's syntax, as far as it matters here: a command is the tokens up to
//! the end of its line; a token is a word, a `"quoted"` string, or a
//! `{…}` block kept as written (nested braces counted, possibly spanning
//! lines); `#` at the start of a token comments out the rest of the line.
//!
//! Then [`expand`] writes one block's config as HAProxy would read it in
//! a case directory: vtest's macros replaced (see its doc).

use std::collections::HashMap;

/// One `haproxy` instance's config in a script.
pub struct Block {
    /// The instance's name (`h1`).
    pub instance: String,
    /// Line of the `haproxy` command in the script.
    pub line: usize,
    /// `-conf`, `-conf-OK` or `-conf-BAD`.
    pub option: String,
    /// The instance's other options before it (`-W`, `-Ws`, `-S`, `-D`).
    pub options: Vec<String>,
    /// The `-arg` values, in order.
    pub args: Vec<String>,
    /// The config as written, macros and all.
    pub conf: String,
}

/// What a script asks of the haproxy under test before it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum Requirement {
    /// A `haproxy -cc` condition that must hold (`version_atleast(2.5)`,
    /// `feature(OPENSSL)`): from `feature cmd "$HAPROXY_PROGRAM -cc '…'"`,
    /// `#REQUIRE_VERSION=`, `#REQUIRE_VERSION_BELOW=`, `#REQUIRE_OPTIONS=`.
    Condition(String),
    /// `#REQUIRE_SERVICES=`: services `haproxy -vv` must list.
    Services(Vec<String>),
    /// `#EXCLUDE_TARGETS=`: build targets (`haproxy -vv`'s TARGET) the test
    /// is not run on.
    ExcludedTargets(Vec<String>),
    /// `feature cmd "command -v socat"`: a tool of the script's traffic
    /// part, which a config check does not use: never blocks a case.
    Tool(String),
    /// Anything else (a `feature` vtest knows and this reader does not, a
    /// command that is no single `-cc` condition, such as ssl_dh.vtc's
    /// with a stray quote, on which vtest's shell fails too): not met, so
    /// the script's cases are not run, and counted.
    Unknown(String),
}

pub struct Script {
    pub blocks: Vec<Block>,
    pub requirements: Vec<Requirement>,
    /// `feature ignore_unknown_macro`: a `${…}` that is no vtest macro
    /// stays for HAProxy (its own `${VAR-default}`).
    pub ignore_unknown_macro: bool,
}

#[derive(Debug)]
enum Token {
    Word(String),
    Quoted(String),
    Braces(String),
}

impl Token {
    fn text(&self) -> &str {
        match self {
            Token::Word(t) | Token::Quoted(t) | Token::Braces(t) => t,
        }
    }
}

/// The commands of a script: each its first line and its tokens.
fn commands(text: &str) -> Result<Vec<(usize, Vec<Token>)>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut commands = Vec::new();
    let mut current: Vec<Token> = Vec::new();
    let mut start = 1;
    let mut line = 1;
    let mut i = 0;
    let mut end_command = |current: &mut Vec<Token>, start: usize| {
        if !current.is_empty() {
            commands.push((start, std::mem::take(current)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                end_command(&mut current, start);
                line += 1;
                i += 1;
            }
            ' ' | '\t' | '\r' => i += 1,
            '\\' if chars.get(i + 1) == Some(&'\n') => {
                line += 1;
                i += 2;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' => {
                if current.is_empty() {
                    start = line;
                }
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("line {line}: unterminated string")),
                        Some('"') => break,
                        Some('\\') if i + 1 < chars.len() => {
                            s.push(chars[i + 1]);
                            i += 2;
                        }
                        Some(&c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            s.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                current.push(Token::Quoted(s));
            }
            '{' => {
                if current.is_empty() {
                    start = line;
                }
                let opened = line;
                let mut depth = 0usize;
                let begin = i + 1;
                loop {
                    match chars.get(i) {
                        None => return Err(format!("line {opened}: '{{' never closed")),
                        Some('{') => depth += 1,
                        Some('}') => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        Some('\n') => line += 1,
                        Some(_) => {}
                    }
                    i += 1;
                }
                current.push(Token::Braces(chars[begin..i].iter().collect()));
                i += 1;
            }
            _ => {
                if current.is_empty() {
                    start = line;
                }
                let begin = i;
                while i < chars.len() && !chars[i].is_whitespace() {
                    i += 1;
                }
                current.push(Token::Word(chars[begin..i].iter().collect()));
            }
        }
    }
    end_command(&mut current, start);
    Ok(commands)
}

/// Reads a script.
pub fn parse(text: &str) -> Result<Script, String> {
    let mut script =
        Script { blocks: Vec::new(), requirements: Vec::new(), ignore_unknown_macro: false };
    for (line, tokens) in commands(text)? {
        match tokens.first().map(Token::text) {
            Some("haproxy") => {
                let instance = tokens.get(1).map(Token::text).unwrap_or_default().to_owned();
                let mut args = Vec::new();
                let mut options = Vec::new();
                let mut rest = tokens[2.min(tokens.len())..].iter();
                while let Some(token) = rest.next() {
                    let option = token.text();
                    let conf = match option {
                        "-arg" => {
                            args.extend(rest.next().map(|t| t.text().to_owned()));
                            continue;
                        }
                        "-conf" | "-conf-OK" => rest.next(),
                        "-conf-BAD" => rest.nth(1),
                        _ => {
                            options.push(option.to_owned());
                            continue;
                        }
                    };
                    let Some(Token::Braces(conf)) = conf else {
                        return Err(format!("line {line}: {option} without a {{…}} config"));
                    };
                    script.blocks.push(Block {
                        instance: instance.clone(),
                        line,
                        option: option.to_owned(),
                        options: options.clone(),
                        args: args.clone(),
                        conf: conf.clone(),
                    });
                }
            }
            Some("feature") => {
                let mut rest = tokens[1..].iter();
                while let Some(token) = rest.next() {
                    match token.text() {
                        "ignore_unknown_macro" => script.ignore_unknown_macro = true,
                        "cmd" => {
                            let command = rest.next().map(Token::text).unwrap_or_default();
                            script.requirements.push(feature_cmd(command));
                        }
                        other => script.requirements.push(Requirement::Unknown(other.to_owned())),
                    }
                }
            }
            _ => {}
        }
    }
    for raw in text.lines() {
        let Some((key, value)) = raw.trim().strip_prefix('#').and_then(|l| l.split_once('='))
        else {
            continue;
        };
        let list = || value.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let requirement = match key.trim() {
            "REQUIRE_VERSION" => {
                Requirement::Condition(format!("version_atleast({})", value.trim()))
            }
            "REQUIRE_VERSION_BELOW" => {
                Requirement::Condition(format!("!version_atleast({})", value.trim()))
            }
            "REQUIRE_OPTIONS" | "REQUIRE_OPTION" => {
                let all: Vec<String> = list()
                    .map(|any| {
                        let any: Vec<String> =
                            any.split('|').map(|o| format!("feature({})", o.trim())).collect();
                        format!("({})", any.join(" || "))
                    })
                    .collect();
                Requirement::Condition(all.join(" && "))
            }
            "REQUIRE_SERVICES" | "REQUIRE_SERVICE" => Requirement::Services(list().collect()),
            "EXCLUDE_TARGETS" => Requirement::ExcludedTargets(list().collect()),
            _ => continue,
        };
        script.requirements.push(requirement);
    }
    Ok(script)
}

/// `feature cmd "…"`: a `haproxy -cc` condition, or a tool.
fn feature_cmd(command: &str) -> Requirement {
    let haproxy = command
        .strip_prefix("$HAPROXY_PROGRAM")
        .map(|r| r.trim_start())
        .map(|r| r.strip_prefix("$HAPROXY_ARGS").unwrap_or(r).trim_start());
    if let Some(condition) = haproxy
        .and_then(|r| r.strip_prefix("-cc"))
        .map(str::trim)
        .and_then(|r| r.strip_prefix('\''))
        .and_then(|r| r.strip_suffix('\''))
        .filter(|c| !c.contains('\''))
    {
        return Requirement::Condition(condition.to_owned());
    }
    let tools = command.split("&&").map(str::trim);
    if tools.clone().all(|t| t.starts_with("command -v ")) {
        return Requirement::Tool(command.to_owned());
    }
    Requirement::Unknown(format!("cmd {command:?}"))
}

/// The loopback address every vtest macro `${…_addr}` names.
const ADDR: &str = "127.0.0.1";

/// Ports for the names of one script's listeners and servers: one each,
/// distinct, handed out in order from a range nothing is expected to use
/// (a config check binds nothing).
pub struct Ports {
    next: u16,
    named: HashMap<String, u16>,
}

impl Ports {
    pub fn new(first: u16) -> Ports {
        Ports { next: first, named: HashMap::new() }
    }

    fn of(&mut self, name: &str) -> u16 {
        if let Some(&port) = self.named.get(name) {
            return port;
        }
        let port = self.next;
        self.next = self.next.checked_add(1).expect("ports run out");
        self.named.insert(name.to_owned(), port);
        port
    }
}

/// A block's config as a case directory holds it.
pub struct Expanded {
    pub config: String,
    /// What the config names under `${testdir}` (the script's directory):
    /// paths relative to it, `""` for the directory itself.
    pub testdir: Vec<String>,
}

/// `block`'s config with vtest's macros replaced, as HAProxy should read
/// it from a case directory deployed at `origin` (the place a render names
/// itself by: the gate shows it there, bare HAProxy's copy names its own
/// directory instead, case.rs):
///
/// - `fd@${NAME}` (a socket vtest opens and passes) → `127.0.0.1:PORT`, and
///   `${INSTANCE_NAME_addr}` / `_port` / `_sock` name that address, as vtest
///   defines them; every other `${X_addr}` / `${X_port}` (servers `s1`,
///   syslog `Slg1`, other instances) → `127.0.0.1` and X's own port;
/// - `${testdir}` (the script's directory) → `origin`, which holds the
///   files named under it (listed in [`Expanded::testdir`]). Absolute as in
///   vtest, so a `crt ${testdir}/a/b.pem` stays clear of `crt-base
///   ${testdir}/a`, and HAProxy 2.6 and 3.0 do not loop forever on a
///   crt-list's blank line as they do under a relative `crt-base`;
/// - `${tmpdir}` → `origin/tmp` (every use is a UNIX socket's path, which
///   a check never binds);
/// - anything else (HAProxy's own `${HAPROXY_TEST_TIMEOUT-5s}`) stays for
///   HAProxy, as `feature ignore_unknown_macro` asks.
///
/// An `-arg "-L NAME"` (the local peer's name) becomes `localpeer NAME` in
/// `global`, and the option `-W` or `-Ws` (master-worker mode, which a
/// `program` section needs) `master-worker`; other arguments (`-V`, `-m`,
/// `-S`) change nothing a check judges.
pub fn expand(block: &Block, origin: &str, ports: &mut Ports) -> Expanded {
    let conf = &block.conf;
    let mut out = String::with_capacity(conf.len());
    let mut testdir = Vec::new();
    let mut rest = conf.as_str();
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[at..]);
            rest = "";
            break;
        };
        let name = &after[..close];
        rest = &after[close + 1..];
        if out.ends_with("fd@") {
            out.truncate(out.len() - 3);
            let port = ports.of(&format!("{}_{name}", block.instance));
            out.push_str(&format!("{ADDR}:{port}"));
        } else if name == "testdir" {
            let path = rest.strip_prefix('/').unwrap_or("");
            let end =
                path.find(|c: char| c.is_whitespace() || "\"'),".contains(c)).unwrap_or(path.len());
            testdir.push(path[..end].to_owned());
            out.push_str(origin);
        } else if name == "tmpdir" {
            out.push_str(&format!("{origin}/tmp"));
        } else if name.ends_with("_addr") {
            out.push_str(ADDR);
        } else if let Some(base) = name.strip_suffix("_port") {
            out.push_str(&ports.of(base).to_string());
        } else if let Some(base) = name.strip_suffix("_sock") {
            out.push_str(&format!("{ADDR} {}", ports.of(base)));
        } else {
            out.push_str(&format!("${{{name}}}"));
        }
    }
    out.push_str(rest);
    let peer = block.args.iter().find_map(|a| {
        let mut words = a.split_whitespace();
        (words.next() == Some("-L")).then(|| words.next()).flatten()
    });
    if let Some(peer) = peer {
        out = with_global_line(&out, &format!("\tlocalpeer {peer}"));
    }
    if block.options.iter().any(|o| o == "-W" || o == "-Ws") {
        out = with_global_line(&out, "\tmaster-worker");
    }
    Expanded { config: out, testdir }
}

/// `config` with `line` first in its `global` section (one added first
/// if it has none).
fn with_global_line(config: &str, line: &str) -> String {
    let mut offset = 0;
    for raw in config.split_inclusive('\n') {
        if raw.split_whitespace().next() == Some("global") {
            let end = offset + raw.len();
            let newline = if raw.ends_with('\n') { "" } else { "\n" };
            return format!("{}{newline}{line}\n{}", &config[..end], &config[end..]);
        }
        offset += raw.len();
    }
    format!("global\n{line}\n{config}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = r#"varnishtest "x"
#REQUIRE_VERSION=2.4
#REQUIRE_OPTIONS=ZLIB|SLZ,LUA
feature ignore_unknown_macro
feature cmd "$HAPROXY_PROGRAM -cc 'version_atleast(2.5-dev0)'"
feature cmd "command -v socat"
server s1 {
    rxreq
    txresp -body "x"
} -start
haproxy h1 -arg "-L A" -conf {
    global
        crt-base ${testdir}
    frontend fe
        bind "fd@${fe1}" ssl crt ${testdir}/common.pem
        bind "${tmpdir}/ssl.sock"
        http-request set-var(txn.x) str(${HAPROXY_TEST_TIMEOUT-5s}) if { path /a }
        server s1 ${s1_addr}:${s1_port}
        server h ${h1_fe1_addr}:${h1_fe1_port}
} -start
haproxy h2 -Ws -S -conf-BAD {} {
    defaults
} # a comment { with a brace
haproxy h1 -cli { send "show info" }
"#;

    #[test]
    fn a_script_reads_as_its_blocks_and_requirements() {
        let script = parse(SCRIPT).unwrap();
        assert!(script.ignore_unknown_macro);
        assert_eq!(
            script.requirements,
            [
                Requirement::Condition("version_atleast(2.5-dev0)".into()),
                Requirement::Tool("command -v socat".into()),
                Requirement::Condition("version_atleast(2.4)".into()),
                Requirement::Condition("(feature(ZLIB) || feature(SLZ)) && (feature(LUA))".into()),
            ]
        );
        let found: Vec<_> = script
            .blocks
            .iter()
            .map(|b| (b.instance.as_str(), b.line, b.option.as_str()))
            .collect();
        assert_eq!(found, [("h1", 11, "-conf"), ("h2", 21, "-conf-BAD")]);
        assert_eq!(script.blocks[1].conf.trim(), "defaults");
        assert_eq!(script.blocks[1].options, ["-Ws", "-S"]);
        let e = expand(&script.blocks[1], "/etc/haproxy", &mut Ports::new(20000));
        assert_eq!(e.config, "global\n\tmaster-worker\n\n    defaults\n");

        let mut ports = Ports::new(20000);
        let e = expand(&script.blocks[0], "/etc/haproxy", &mut ports);
        assert_eq!(e.testdir, ["", "common.pem"]);
        let lines: Vec<&str> = e.config.lines().map(str::trim).collect();
        assert_eq!(
            lines[1..],
            [
                "global",
                "localpeer A",
                "crt-base /etc/haproxy",
                "frontend fe",
                "bind \"127.0.0.1:20000\" ssl crt /etc/haproxy/common.pem",
                "bind \"/etc/haproxy/tmp/ssl.sock\"",
                "http-request set-var(txn.x) str(${HAPROXY_TEST_TIMEOUT-5s}) if { path /a }",
                "server s1 127.0.0.1:20001",
                "server h 127.0.0.1:20000",
            ]
        );
    }
}
