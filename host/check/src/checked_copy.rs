//! The checked copy: the one place where the render's config is rewritten
//! before `haproxy -c` reads it (docs/checking.md, "The checked copy").
//!
//! Three rewrites, all through HAProxy's own tokenizing ([`super::tokenize`]),
//! each replacing whole words in place so that every other byte of the line,
//! and every other line, stays as the render wrote it (line numbers in
//! HAProxy's messages are the render's own):
//!
//! - `default-path origin PATH` points at the check directory, where the
//!   render's files are;
//! - `quiet` in `global` is set aside (it would hide HAProxy's alerts; the
//!   checker also passes `-V`, which outranks it, so this is belt and braces,
//!   and the message says so);
//! - with the sandbox on, user and group names HAProxy would look up while
//!   parsing become numeric ids, resolved here in the parent, because the
//!   sandbox hides `/etc/passwd` and `/etc/group` from HAProxy: `user`/`group`
//!   in `global`, and the `user`/`group` options of `unix-bind`,
//!   `stats socket` and `bind` lines, found the way HAProxy walks options;
//!   `user`/`group` in a `program` section (which takes no id) are set
//!   aside as comments, since every name resolves alike
//!   ([`super::sandbox::ids`]).
//!
//! A line HAProxy would refuse to split, or whose words depend on the
//! environment, is never touched: HAProxy judges it as written.

use super::tokenize::{self, Line, Lookup, Word};
use memchr::memmem::Finder;
use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::LazyLock;

/// A user or a group name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IdKind {
    User,
    Group,
}

/// Resolves a name to its numeric id on this host, `None` when unknown.
pub type ResolveId<'a> = &'a (dyn Fn(IdKind, &[u8]) -> Option<u32> + Sync);

/// What the checked copy is made for.
pub struct Rewrites<'a> {
    /// The check directory, where `default-path origin` must point.
    pub check_dir: &'a Path,
    /// Turn user and group names into ids (the sandbox is on).
    pub resolve_ids: Option<ResolveId<'a>>,
    /// HAProxy inherits the gate's environment (the sandbox is off); with the
    /// sandbox on it starts with an empty one.
    pub inherit_env: bool,
}

/// The config HAProxy checks, and what was changed that the message must say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedCopy {
    pub config: String,
    /// Lines (1-based) where `quiet` was set aside.
    pub quiet_lines: Vec<usize>,
    /// Whether the render can make HAProxy print lines of its own choosing:
    /// a `\n` escape in a quoted word (a `.notice "…\n[ALERT] …"`), or Lua,
    /// which prints what it likes. Such output is read for its kind all the
    /// same, but no line of it is believed over HAProxy's exit status.
    pub forgeable: bool,
}

impl CheckedCopy {
    /// One sentence for the verdict's message, if anything there is to say.
    pub fn note(&self) -> Option<String> {
        if self.quiet_lines.is_empty() {
            return None;
        }
        let lines: Vec<String> = self.quiet_lines.iter().map(usize::to_string).collect();
        Some(format!(
            "(`quiet` at line {} was set aside for the check: nothing in a render may silence HAProxy's judgement)",
            lines.join(", ")
        ))
    }
}

/// Section keywords of HAProxy 2.6 to 3.2: a line starting with one opens a section.
const SECTIONS: [&str; 20] = [
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "userlist",
    "peers",
    "resolvers",
    "mailers",
    "program",
    "http-errors",
    "ring",
    "cache",
    "fcgi-app",
    "crt-store",
    "log-forward",
    "log-profile",
    "namespace_list",
    "traces",
    "acme",
];

/// `bind` options and how many arguments each takes (HAProxy 2.6 to 3.2,
/// from the `bind_kws` tables of its sources). HAProxy walks a `bind` line
/// keyword by keyword, skipping each one's arguments; so does the rewrite,
/// so a `user` that is an argument (`name user`) is never taken for the option.
const BIND_OPTIONS: [(&str, usize); 77] = [
    ("accept-netscaler-cip", 1),
    ("accept-proxy", 0),
    ("allow-0rtt", 0),
    ("alpn", 1),
    ("backlog", 1),
    ("ca-file", 1),
    ("ca-ignore-err", 1),
    ("ca-sign-file", 1),
    ("ca-sign-pass", 1),
    ("ca-verify-file", 1),
    ("ciphers", 1),
    ("ciphersuites", 1),
    ("client-sigalgs", 1),
    ("crl-file", 1),
    ("crt", 1),
    ("crt-ignore-err", 1),
    ("crt-list", 1),
    ("curves", 1),
    ("default-crt", 1),
    ("defer-accept", 0),
    ("ecdhe", 1),
    ("expose-fd", 1),
    ("force-sslv3", 0),
    ("force-tlsv10", 0),
    ("force-tlsv11", 0),
    ("force-tlsv12", 0),
    ("force-tlsv13", 0),
    ("generate-certificates", 0),
    ("gid", 1),
    ("group", 1),
    ("guid-prefix", 1),
    ("id", 1),
    ("idle-ping", 1),
    ("interface", 1),
    ("label", 1),
    ("level", 1),
    ("maxconn", 1),
    ("mode", 1),
    ("mss", 1),
    ("name", 1),
    ("namespace", 1),
    ("nbconn", 1),
    ("nice", 1),
    ("no-alpn", 0),
    ("no-ca-names", 0),
    ("no-sslv3", 0),
    ("no-strict-sni", 0),
    ("no-tls-tickets", 0),
    ("no-tlsv10", 0),
    ("no-tlsv11", 0),
    ("no-tlsv12", 0),
    ("no-tlsv13", 0),
    ("npn", 1),
    ("prefer-client-ciphers", 0),
    ("process", 1),
    ("proto", 1),
    ("quic-cc-algo", 1),
    ("quic-force-retry", 0),
    ("quic-socket", 1),
    ("severity-output", 1),
    ("shards", 1),
    ("sigalgs", 1),
    ("ssl", 0),
    ("ssl-max-ver", 1),
    ("ssl-min-ver", 1),
    ("strict-sni", 0),
    ("tcp-ut", 1),
    ("tfo", 0),
    ("thread", 1),
    ("tls-ticket-keys", 1),
    ("tls-tickets", 0),
    ("transparent", 0),
    ("uid", 1),
    ("user", 1),
    ("v4v6", 0),
    ("v6only", 0),
    ("verify", 1),
];

/// `unix-bind` options in `global`: each takes one argument.
const UNIX_BIND_OPTIONS: [&str; 6] = ["prefix", "mode", "uid", "gid", "user", "group"];

/// Makes the checked copy of `config`.
pub fn checked_copy(config: &str, rewrites: &Rewrites) -> io::Result<CheckedCopy> {
    let dir_word = config_word(rewrites.check_dir)?;
    let mut out = String::with_capacity(config.len() + 64);
    let mut quiet_lines = Vec::new();
    let mut section = Section::Other;
    let env = Environment::scan(config, rewrites.inherit_env);
    for (index, raw) in config.split_inclusive('\n').enumerate() {
        let body = raw.strip_suffix('\n').unwrap_or(raw);
        // Cheap test first: most lines of a big render name none of the keywords.
        if !mentions_a_target(body) && !opens_a_section(body) {
            out.push_str(raw);
            continue;
        }
        let line = tokenize::line_in(body.as_bytes(), &|name| env.lookup(name, index));
        follow_section(&line, &mut section);
        let in_global = section == Section::Global;
        let mut edits: Vec<(&Word, String)> = Vec::new();
        if line.is_exact() {
            let args = line.args();
            if line.arg_is(0, "default-path") && line.arg_is(1, "origin") && args.len() >= 3 {
                edits.push((&args[2], dir_word.clone()));
            }
            if in_global && args.len() == 1 && line.arg_is(0, "quiet") {
                edits.push((&args[0], "#quiet".to_owned()));
                quiet_lines.push(index + 1);
            }
            if let Some(resolve) = rewrites.resolve_ids {
                ids(&line, section, resolve, &mut edits);
            }
        }
        if edits.is_empty() {
            out.push_str(raw);
            continue;
        }
        edits.sort_by_key(|(w, _)| w.span.start);
        let mut at = 0;
        for (word, text) in edits {
            out.push_str(&body[at..word.span.start]);
            out.push_str(&text);
            at = word.span.end;
        }
        out.push_str(&raw[at..]);
    }
    Ok(CheckedCopy { config: out, quiet_lines, forgeable: forgeable(config) })
}

/// Whether a line could hold a word any rewrite looks for. A word can be
/// spelled with quotes or escapes, so a line with a quote or a backslash
/// counts, as does one with a keyword as plain text. (A big render has tens
/// of thousands of lines: these tests run on every one, so they use memchr.)
fn mentions_a_target(body: &str) -> bool {
    static KEYWORDS: LazyLock<[Finder<'static>; 5]> = LazyLock::new(|| {
        ["default-path", "quiet", "user", "group", "bind"].map(|k| Finder::new(k.as_bytes()))
    });
    has_quote_or_escape(body) || KEYWORDS.iter().any(|k| k.find(body.as_bytes()).is_some())
}

fn has_quote_or_escape(body: &str) -> bool {
    memchr::memchr3(b'"', b'\'', b'\\', body.as_bytes()).is_some()
}

/// The sections a rewrite cares about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Section {
    Global,
    Program,
    Other,
}

/// Notes whether `line` opens a section, and which.
fn follow_section(line: &Line, section: &mut Section) {
    if let Some(first) = line.args().first()
        && line.is_exact()
        && SECTIONS.iter().any(|s| first.is(s))
    {
        *section = if first.is("global") {
            Section::Global
        } else if first.is("program") {
            Section::Program
        } else {
            Section::Other
        };
    }
}

/// Whether a line starts (after blanks) with a section keyword as plain text.
fn opens_a_section(body: &str) -> bool {
    let bytes = body.as_bytes();
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    let len = bytes[start..]
        .iter()
        .position(|b| b.is_ascii_whitespace() || *b == b'#')
        .unwrap_or(bytes.len() - start);
    let first = &bytes[start..start + len];
    SECTIONS.iter().any(|s| s.as_bytes() == first)
}

/// What HAProxy's environment holds at each line, as far as the config
/// tells: `setenv`, `presetenv` and `unsetenv` in `global` change it while
/// HAProxy parses. A variable is known at a line only when every directive
/// that touches it comes before that line (3.2 runs them all in a first pass
/// over the whole file, 2.6 as it goes: both agree then), none of them sits
/// inside a `.if` block, and HAProxy does not set it itself (`HAPROXY_*`).
struct Environment {
    inherit: bool,
    /// Per variable, what its directives add up to. Only the sum is kept, so
    /// a lookup costs the same however many directives touch the variable.
    changes: HashMap<Vec<u8>, Directives>,
    /// A directive the scan cannot follow (`resetenv`, an inexact line, one
    /// inside `.if`): every variable it may touch is unknown.
    lost: bool,
}

enum Change {
    Set(Vec<u8>),
    SetIfUnset(Vec<u8>),
    Unset,
}

/// One variable's directives, added up in file order.
struct Directives {
    /// The line (index) of the last one: before it, the variable is unknown.
    last: usize,
    value: After,
}

/// The variable after all its directives.
enum After {
    /// As inherited (only `presetenv` on a set variable, so far).
    Inherited,
    /// As inherited if it was set, else this (`presetenv` on an unset one).
    InheritedElse(Vec<u8>),
    Value(Vec<u8>),
    Unset,
}

impl After {
    fn then(self, change: Change) -> After {
        match (self, change) {
            (_, Change::Set(v)) => After::Value(v),
            (_, Change::Unset) => After::Unset,
            (After::Inherited, Change::SetIfUnset(v)) => After::InheritedElse(v),
            (After::Unset, Change::SetIfUnset(v)) => After::Value(v),
            (kept, Change::SetIfUnset(_)) => kept,
        }
    }
}

impl Environment {
    fn scan(config: &str, inherit: bool) -> Environment {
        let mut env = Environment { inherit, changes: HashMap::new(), lost: false };
        let (mut section, mut depth) = (Section::Other, 0usize);
        for (index, body) in config.split('\n').enumerate() {
            let trimmed = body.trim_start();
            if trimmed.starts_with(".if") {
                depth += 1;
            } else if trimmed.starts_with(".endif") {
                depth = depth.saturating_sub(1);
            }
            static ENV: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"env"));
            if ENV.find(body.as_bytes()).is_none()
                && !opens_a_section(body)
                && !has_quote_or_escape(body)
            {
                continue;
            }
            let line = tokenize::line(body.as_bytes());
            let args = line.args();
            follow_section(&line, &mut section);
            if section != Section::Global {
                continue;
            }
            let directive = ["setenv", "presetenv", "unsetenv", "resetenv"]
                .into_iter()
                .find(|d| line.arg_is(0, d));
            let Some(directive) = directive else {
                if !line.is_exact() && line.words.first().is_none_or(|w| w.text.ends_with(b"env")) {
                    env.lost = true; // a directive that cannot be read
                }
                continue;
            };
            if !line.is_exact() || depth > 0 || directive == "resetenv" {
                env.lost = true;
                continue;
            }
            let mut record = |name: &Word, change: Change| {
                let directives = env
                    .changes
                    .entry(name.text.clone())
                    .or_insert(Directives { last: index, value: After::Inherited });
                directives.last = index;
                directives.value =
                    std::mem::replace(&mut directives.value, After::Unset).then(change);
            };
            match (directive, args) {
                ("setenv", [_, name, value]) => record(name, Change::Set(value.text.clone())),
                ("presetenv", [_, name, value]) => {
                    record(name, Change::SetIfUnset(value.text.clone()))
                }
                ("unsetenv", [_, names @ ..]) => {
                    names.iter().for_each(|n| record(n, Change::Unset))
                }
                // a malformed directive: HAProxy refuses it; nothing to follow
                _ => {}
            }
        }
        env
    }

    fn lookup(&self, name: &[u8], at: usize) -> Lookup {
        if self.lost || name.starts_with(b"HAPROXY_") {
            return Lookup::Unknown;
        }
        let directives = self.changes.get(name);
        if directives.is_some_and(|d| d.last >= at) {
            return Lookup::Unknown;
        }
        let inherited = || {
            let name = std::str::from_utf8(name).ok().filter(|_| self.inherit)?;
            std::env::var_os(name).map(|v| v.into_encoded_bytes())
        };
        let value = match directives.map_or(&After::Inherited, |d| &d.value) {
            After::Inherited => inherited(),
            After::InheritedElse(v) => inherited().or_else(|| Some(v.clone())),
            After::Value(v) => Some(v.clone()),
            After::Unset => None,
        };
        value.map_or(Lookup::Unset, Lookup::Value)
    }
}

fn forgeable(config: &str) -> bool {
    let escapes =
        config.contains('\\') && ["\\n", "\\x0a", "\\x0A"].iter().any(|e| config.contains(e));
    escapes || config.contains("lua-")
}

/// The user and group rewrites of one exact line.
fn ids<'l>(
    line: &'l Line,
    section: Section,
    resolve: ResolveId,
    edits: &mut Vec<(&'l Word, String)>,
) {
    let args = line.args();
    let in_global = section == Section::Global;
    // A program's `user`/`group` take a name only; HAProxy looks it up while
    // parsing and uses it only when it starts the program, which `-c` never
    // does. Every name resolves alike, so the line is set aside.
    if section == Section::Program
        && args.len() == 2
        && (line.arg_is(0, "user") || line.arg_is(0, "group"))
        && !args[1].text.iter().all(u8::is_ascii_digit)
    {
        let kind = if args[0].is("user") { IdKind::User } else { IdKind::Group };
        if resolve(kind, &args[1].text).is_some() {
            let keyword = if kind == IdKind::User { "#user" } else { "#group" };
            edits.push((&args[0], keyword.to_owned()));
        }
        return;
    }
    let rewrite_pair = |keyword: &'l Word, name: &'l Word, edits: &mut Vec<(&'l Word, String)>| {
        let kind = if keyword.is("user") { IdKind::User } else { IdKind::Group };
        // A number is not a name: HAProxy looks it up as written, and so it stays.
        if name.text.iter().all(u8::is_ascii_digit) {
            return;
        }
        if let Some(id) = resolve(kind, &name.text) {
            let word = if kind == IdKind::User { "uid" } else { "gid" };
            edits.push((keyword, word.to_owned()));
            edits.push((name, id.to_string()));
        }
    };
    if in_global && args.len() == 2 && (line.arg_is(0, "user") || line.arg_is(0, "group")) {
        rewrite_pair(&args[0], &args[1], edits);
        return;
    }
    let (from, options): (usize, OptionArity) = if in_global && line.arg_is(0, "unix-bind") {
        (1, &|kw: &[u8]| UNIX_BIND_OPTIONS.iter().any(|o| o.as_bytes() == kw).then_some(1))
    } else if in_global && line.arg_is(0, "stats") && line.arg_is(1, "socket") {
        (3, &bind_option)
    } else if line.arg_is(0, "bind") {
        (2, &bind_option)
    } else {
        return;
    };
    let mut at = from;
    while at < args.len() {
        // An option HAProxy does not know ends its walk with an alert; so ends ours.
        let Some(skip) = options(&args[at].text) else { break };
        if (args[at].is("user") || args[at].is("group")) && at + 1 < args.len() {
            rewrite_pair(&args[at], &args[at + 1], edits);
        }
        at += 1 + skip;
    }
}

/// How many arguments an option takes, `None` for an unknown option.
type OptionArity<'a> = &'a dyn Fn(&[u8]) -> Option<usize>;

fn bind_option(keyword: &[u8]) -> Option<usize> {
    BIND_OPTIONS.iter().find(|(k, _)| k.as_bytes() == keyword).map(|(_, skip)| *skip)
}

/// `dir` as one HAProxy config word: bare when it is plain, single-quoted
/// (no expansion, no escapes) otherwise.
fn config_word(dir: &Path) -> io::Result<String> {
    let text = dir.to_str().ok_or_else(|| invalid("the check directory's path is not UTF-8"))?;
    if !dir.is_absolute() {
        return Err(invalid("the check directory's path is not absolute"));
    }
    if text.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b)) {
        return Ok(text.to_owned());
    }
    if text.contains(['\'', '\n', '\r', '\0']) {
        return Err(invalid("the check directory's path cannot be written in an HAProxy config"));
    }
    Ok(format!("'{text}'"))
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DIR: &str = "/tmp/rendergate-check-abc";

    fn ids_of(kind: IdKind, name: &[u8]) -> Option<u32> {
        match (kind, name) {
            (IdKind::User, b"root") | (IdKind::Group, b"root") => Some(0),
            (IdKind::User, b"haproxy") => Some(104),
            (IdKind::Group, b"haproxy") => Some(108),
            (IdKind::User, b"user") => Some(1000),
            _ => None,
        }
    }

    fn copy(config: &str) -> CheckedCopy {
        checked_copy(
            config,
            &Rewrites { check_dir: Path::new(DIR), resolve_ids: Some(&ids_of), inherit_env: false },
        )
        .unwrap()
    }

    fn rewritten(config: &str) -> String {
        copy(config).config
    }

    #[test]
    fn many_directives_and_many_lookups_of_one_variable_cost_linear_time() {
        // 40,000 `setenv U` and 40,000 lines reading "${U}": following each
        // lookup through every directive took minutes. Generous bound.
        let sets = "  setenv U root\n".repeat(40_000);
        let reads = "  .notice \"${U}\"\n".repeat(40_000);
        let config = format!("global\n{sets}{reads}  user \"${{U}}\"\n");
        let started = std::time::Instant::now();
        let out = rewritten(&config);
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(out.ends_with("  uid 0\n"), "{}", &out[out.len() - 40..]);
    }

    #[test]
    fn default_path_origin_points_at_the_check_directory_and_keeps_the_rest() {
        let config = "global\n\tdefault-path   origin /etc/haproxy # comment\r\n  default-path config\n# default-path origin /x\n  default-path origin\ndefault-path origin \"/y\"";
        let out = rewritten(config);
        assert_eq!(
            out,
            format!(
                "global\n\tdefault-path   origin {DIR} # comment\r\n  default-path config\n# default-path origin /x\n  default-path origin\ndefault-path origin {DIR}"
            )
        );
        // too many words stay too many: HAProxy's alert is not rewritten away
        assert_eq!(
            rewritten("default-path origin /x extra\n"),
            format!("default-path origin {DIR} extra\n")
        );
    }

    #[test]
    fn odd_check_directories_are_quoted_or_refused() {
        let with = |dir: &str| {
            checked_copy(
                "default-path origin /x\n",
                &Rewrites { check_dir: Path::new(dir), resolve_ids: None, inherit_env: false },
            )
            .map(|c| c.config)
        };
        assert_eq!(with("/tmp/my dir").unwrap(), "default-path origin '/tmp/my dir'\n");
        assert!(with("/tmp/it's").is_err());
        assert!(with("relative").is_err());
    }

    #[test]
    fn quiet_in_global_is_set_aside_and_said() {
        let c =
            copy("global\n  quiet\n  \"quiet\" # x\ndefaults\n  quiet\nglobal\n  quiet extra\n");
        assert_eq!(
            c.config,
            "global\n  #quiet\n  #quiet # x\ndefaults\n  quiet\nglobal\n  quiet extra\n"
        );
        assert_eq!(c.quiet_lines, [2, 3]);
        assert!(c.note().unwrap().contains("line 2, 3"), "{:?}", c.note());
        assert_eq!(copy("global\n  daemon\n").note(), None);
        // an unset variable leaves an empty word, which ends the arguments: still `quiet` alone
        assert_eq!(copy("global\n  quiet \"${X}\"\n").config, "global\n  #quiet \"${X}\"\n");
    }

    #[test]
    fn a_render_that_can_print_its_own_lines_is_marked() {
        assert!(!copy("global\n  .notice \"hello\"\n").forgeable);
        assert!(copy("global\n  .notice \"a\\n[ALERT] b\"\n").forgeable);
        assert!(copy("global\n  .notice \"a\\x0a[ALERT] b\"\n").forgeable);
        assert!(copy("global\n  lua-load x.lua\n").forgeable);
    }

    #[test]
    fn a_programs_user_and_group_are_set_aside_when_the_name_resolves() {
        let config = "program p\n  command /bin/true\n  user root\n  \"group\" haproxy # x\n  user nosuch\n  user root x\n  user 0\nglobal\n  user root\n";
        assert_eq!(
            rewritten(config),
            "program p\n  command /bin/true\n  #user root\n  #group haproxy # x\n  user nosuch\n  user root x\n  user 0\nglobal\n  uid 0\n"
        );
    }

    #[test]
    fn names_become_ids_where_haproxy_looks_them_up() {
        let config = "global\n  user \"root\" # the admin\n  group 'root'\n  stats socket /run/s.sock mode 600 user root group root level admin\n  unix-bind prefix /run mode 770 user root group root\nfrontend f\n  bind /run/f.sock user root group root\n  bind :80 name user\n";
        assert_eq!(
            rewritten(config),
            "global\n  uid 0 # the admin\n  gid 0\n  stats socket /run/s.sock mode 600 uid 0 gid 0 level admin\n  unix-bind prefix /run mode 770 uid 0 gid 0\nfrontend f\n  bind /run/f.sock uid 0 gid 0\n  bind :80 name user\n"
        );
    }

    #[test]
    fn haproxys_spelling_of_a_name_is_read_as_haproxy_reads_it() {
        // a comment glued to the name, an escape, quotes in pieces
        assert_eq!(rewritten("global\n  user root#admin\n"), "global\n  uid 0#admin\n");
        assert_eq!(rewritten("global\n  user \\x72oot\n"), "global\n  uid 0\n");
        assert_eq!(rewritten("global\n  user 'ro'\"ot\"\n"), "global\n  uid 0\n");
        // a quoted argument elsewhere on the line is kept as written
        assert_eq!(
            rewritten("frontend f\n  bind \"/run/a b.sock\" name \"x y\" user root\n"),
            "frontend f\n  bind \"/run/a b.sock\" name \"x y\" uid 0\n"
        );
    }

    #[test]
    fn lines_haproxy_refuses_or_cannot_be_known_are_left_alone() {
        for config in [
            "global\n  user \"root\n",
            "global\n  user 'root\n",
            "global\n  user \\x7\n",
            "global\n  user \"${USER}\"\n",
            "global\n  user \"${HAPROXY_LOCALPEER}\"\n",
            // set after its use: 3.2 sees it, 2.6 does not
            "global\n  user \"${U}\"\n  setenv U root\n",
            "global\n  .if defined(X)\n  setenv U root\n  .endif\n  user \"${U}\"\n",
            "global\n  resetenv\n  setenv U root\n  user \"${U}\"\n",
            "global\n  user root extra\n",
            "global\n  user no-such-user\n",
            "global\n  user 0\n",
            "userlist L\n  user root password x\n  group root\n  user root\n",
            "global\n  quiet \"${HAPROXY_X}\"\n",
        ] {
            assert_eq!(rewritten(config), config, "{config}");
        }
    }

    #[test]
    fn names_from_the_environment_the_config_sets_are_resolved() {
        assert_eq!(
            rewritten("global\n  setenv U root\n  user \"${U}\"\n"),
            "global\n  setenv U root\n  uid 0\n"
        );
        assert_eq!(
            rewritten("global\n  presetenv G root\n  presetenv G other\n  group \"${G}\"\n"),
            "global\n  presetenv G root\n  presetenv G other\n  gid 0\n"
        );
        assert_eq!(rewritten("global\n  user \"${NOPE-root}\"\n"), "global\n  uid 0\n");
        // the sandboxed HAProxy's environment is empty: the gate's own USER is not seen
        let config = "global\n  setenv U root\n  unsetenv U\n  user \"${U}\" \"\"\n";
        assert_eq!(rewritten(config), config);
    }

    #[test]
    fn bind_options_are_walked_the_way_haproxy_walks_them() {
        // `user` here is the argument of `name`; `root` is then an unknown
        // option HAProxy refuses: nothing may turn that into a valid line.
        let config = "frontend f\n  bind :80 name user root\n";
        assert_eq!(rewritten(config), config);
        // the walk stops at an unknown option
        let config = "frontend f\n  bind :80 bogus user root\n";
        assert_eq!(rewritten(config), config);
        assert_eq!(
            rewritten("frontend f\n  bind :80 ssl crt user user root\n"),
            "frontend f\n  bind :80 ssl crt user uid 0\n"
        );
    }

    #[test]
    fn an_empty_word_ends_the_arguments_as_in_haproxy() {
        assert_eq!(rewritten("global\n  user root \"\"\n"), "global\n  uid 0 \"\"\n");
    }

    /// Words that make lines interesting to HAProxy's tokenizer and to the rewrites.
    fn piece() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            "user",
            "group",
            "root",
            "haproxy",
            "quiet",
            "default-path",
            "origin",
            "/etc/haproxy",
            "bind",
            ":80",
            "name",
            "unix-bind",
            "stats",
            "socket",
            "global",
            "defaults",
            "userlist",
            "\"root\"",
            "'ro'ot",
            "\\x72oot",
            "#",
            "#c",
            "root#x",
            "\"",
            "'",
            "\\",
            "\"${X}\"",
            "\"\"",
            " ",
            "\t",
            "\r",
            "x",
            "\\ ",
            "\"a b\"",
            "level",
            "mode",
            "600",
        ])
        .prop_map(str::to_owned)
    }

    fn config_strategy() -> impl Strategy<Value = String> {
        let line = prop::collection::vec(piece(), 0..8).prop_map(|p| {
            let mut l = String::new();
            for (i, w) in p.iter().enumerate() {
                if i > 0 && !w.starts_with(['#', ' ', '\t', '\r']) {
                    l.push(' ');
                }
                l.push_str(w);
            }
            l
        });
        prop::collection::vec(line, 1..12).prop_map(|lines| lines.join("\n"))
    }

    /// The environment the rewrites assume here: the sandboxed HAProxy's,
    /// empty (the generated lines set no variable).
    fn empty_env(_: &[u8]) -> Lookup {
        Lookup::Unset
    }

    fn words(line: &str) -> Vec<Vec<u8>> {
        tokenize::line_in(line.as_bytes(), &empty_env).words.into_iter().map(|w| w.text).collect()
    }

    proptest! {
        /// A rewrite never changes a line it does not target, keeps the
        /// line count, and the words HAProxy reads on a rewritten line are
        /// the original words with exactly the targeted words replaced.
        #[test]
        fn rewrites_change_only_targeted_words(config in config_strategy()) {
            let out = copy(&config);
            let before: Vec<&str> = config.split('\n').collect();
            let after: Vec<&str> = out.config.split('\n').collect();
            prop_assert_eq!(before.len(), after.len());
            for (n, (b, a)) in before.iter().zip(&after).enumerate() {
                if b == a {
                    continue;
                }
                let original = tokenize::line_in(b.as_bytes(), &empty_env);
                prop_assert!(original.is_exact(), "an inexact line was rewritten: {:?} -> {:?}", b, a);
                let (wb, wa) = (words(b), words(a));
                if out.quiet_lines.contains(&(n + 1)) {
                    // set aside: HAProxy reads no words from it
                    prop_assert_eq!(&wb[0], &b"quiet".to_vec());
                    prop_assert!(wa.is_empty(), "{:?}", a);
                    continue;
                }
                prop_assert_eq!(wb.len(), wa.len(), "{:?} -> {:?}", b, a);
                for (x, y) in wb.iter().zip(&wa) {
                    let allowed = x == y
                        || (x == b"user" && y == b"uid")
                        || (x == b"group" && y == b"gid")
                        || (y.iter().all(u8::is_ascii_digit) && ids_of(IdKind::User, x).or(ids_of(IdKind::Group, x)).is_some())
                        || y == DIR.as_bytes();
                    prop_assert!(allowed, "{:?} became {:?} in {:?} -> {:?}", String::from_utf8_lossy(x), String::from_utf8_lossy(y), b, a);
                }
            }
        }
    }
}
