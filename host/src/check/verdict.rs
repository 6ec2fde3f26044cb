//! Reading HAProxy's words: how `haproxy -c` ended and what it printed,
//! turned into a verdict kind and a message a person can act on.
//!
//! The kinds follow behaviour.md ("Verdicts have three kinds"); the refusal
//! message follows "HAProxy's words, made readable". Everything shown is
//! sanitised first: the check directory's host path never leaks out.

use crate::core::CheckOutcome;
use std::path::Path;

/// How the `haproxy` process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

impl From<std::process::ExitStatus> for Exit {
    fn from(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            // neither: stopped/continued can't be seen by wait(); treat as a failure
            (None, None) => Exit::Code(-1),
        }
    }
}

/// Lines that mean HAProxy judged the config and refused it.
const JUDGING: [&str; 4] = ["[EMERG]", "[ALERT]", "[CRIT]", "[ERR]"];
/// Lines that only advise.
const ADVISORY: [&str; 4] = ["[WARNING]", "[NOTICE]", "[INFO]", "[DEBUG]"];
/// HAProxy's closing words after the real alerts; they add nothing.
const SUMMARIES: [&str; 2] = ["Error(s) found in configuration file", "Fatal errors found in configuration"];
/// HAProxy 2.6's "valid but will not start", printed with exit status 2.
const NO_LISTENER: &str = "Configuration file has no error but will not start (no listener)";

/// Output lines shown around each alert, before and after.
const OUTPUT_CONTEXT: usize = 3;
/// Config lines shown before and after the line an alert names.
const CONFIG_BEFORE: usize = 4;
const CONFIG_AFTER: usize = 3;
/// Enough alerts to act on; a config with a thousand errors needs the first few.
const MAX_BLOCKS: usize = 20;
/// How much of unexplained output an "unavailable" reason quotes.
const QUOTE_LIMIT: usize = 2000;

/// Classifies one run of `haproxy -c`. `config` is the render's own config
/// (line numbers are the same as in the check directory's copy), `check_dir`
/// and `haproxy_path` are removed from everything shown.
pub fn classify(exit: Exit, output: &str, config: &str, check_dir: &Path, haproxy_path: &Path) -> CheckOutcome {
    let output = sanitise(output, check_dir, haproxy_path);
    let lines: Vec<&str> = output.lines().collect();
    let code = match exit {
        Exit::Signal(signal) => {
            return CheckOutcome::Unavailable {
                reason: format!("haproxy was killed by signal {signal}{}", quoted(&output)),
            };
        }
        Exit::Code(code) => code,
    };
    if code == 0 {
        return CheckOutcome::Passed { message: warnings_note(&lines) };
    }
    if lines.iter().any(|l| is_judging(l)) {
        return CheckOutcome::Refused { message: refusal_message(&lines, config) };
    }
    let mut has_line = false;
    let mut no_listener = false;
    let mut only_advice = true;
    let mut previous_advisory = false;
    for line in lines.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
        has_line = true;
        // `   | …` continues the line before it (HAProxy's multi-line warnings)
        let advisory = if line.starts_with('|') {
            previous_advisory
        } else if line.starts_with(NO_LISTENER) {
            no_listener = true;
            true
        } else {
            ADVISORY.iter().any(|tag| line.starts_with(tag))
        };
        only_advice &= advisory;
        previous_advisory = advisory;
    }
    if has_line && only_advice {
        let mut message = if no_listener {
            format!("valid, but HAProxy would not start it: no listener (exit {code})")
        } else {
            format!("valid: HAProxy exited {code} but printed only advisory lines")
        };
        let warnings = warnings_note(&lines);
        if !warnings.is_empty() {
            message.push('\n');
            message.push_str(&warnings);
        }
        return CheckOutcome::Passed { message };
    }
    let reason = if has_line {
        format!("haproxy -c exited {code} without judging the config{}", quoted(&output))
    } else {
        format!("haproxy -c exited {code} with no output")
    };
    CheckOutcome::Unavailable { reason }
}

/// Removes host paths from `text`: the check directory becomes relative
/// (`/tmp/rendergate-check-x/maps/a.map` → `maps/a.map`, the bare directory
/// → `.`), the binary becomes `haproxy`. Control characters other than
/// newline and tab are replaced, so the message cannot drive a terminal.
pub fn sanitise(text: &str, check_dir: &Path, haproxy_path: &Path) -> String {
    let mut text = scrub(text);
    let dir = check_dir.to_string_lossy();
    let dir = dir.trim_end_matches('/');
    // "/" (or nothing) would erase every slash; such a check directory is a bug
    if !dir.is_empty() {
        text = text.replace(&format!("{dir}/"), "").replace(dir, ".");
    }
    let binary = haproxy_path.to_string_lossy();
    if binary.contains('/') {
        text = text.replace(binary.as_ref(), "haproxy");
    }
    text
}

fn scrub(text: &str) -> String {
    text.chars()
        .filter(|&c| c != '\r')
        .map(|c| if c.is_control() && c != '\n' && c != '\t' { '\u{FFFD}' } else { c })
        .collect()
}

fn is_judging(line: &str) -> bool {
    let line = line.trim_start();
    JUDGING.iter().any(|tag| line.starts_with(tag))
}

fn is_summary(line: &str) -> bool {
    SUMMARIES.iter().any(|s| line.contains(s))
}

/// The `[WARNING]` lines (with their continuation lines), for a pass that
/// deserves a remark; empty when there were none.
fn warnings_note(lines: &[&str]) -> String {
    let mut note = Vec::new();
    let mut in_warning = false;
    for line in lines {
        let trimmed = line.trim_start();
        if trimmed.starts_with("[WARNING]") {
            in_warning = true;
        } else if !trimmed.starts_with('|') {
            in_warning = false;
        }
        if in_warning {
            note.push(*line);
        }
    }
    if note.is_empty() {
        return String::new();
    }
    format!("HAProxy warned:\n{}", note.join("\n"))
}

/// One block per alert: the output around it, then the config around the
/// line it names. Summary lines get no block of their own unless there is
/// nothing else to show.
fn refusal_message(lines: &[&str], config: &str) -> String {
    let judging: Vec<usize> = (0..lines.len()).filter(|&i| is_judging(lines[i])).collect();
    let mut alerts: Vec<usize> = judging.iter().copied().filter(|&i| !is_summary(lines[i])).collect();
    if alerts.is_empty() {
        alerts = judging;
    }
    let config_lines: Vec<&str> = config.lines().collect();
    let mut blocks: Vec<String> =
        alerts.iter().take(MAX_BLOCKS).map(|&i| alert_block(lines, i, &config_lines)).collect();
    if alerts.len() > MAX_BLOCKS {
        blocks.push(format!("… and {} more alerts", alerts.len() - MAX_BLOCKS));
    }
    blocks.join("\n\n")
}

fn alert_block(lines: &[&str], at: usize, config: &[&str]) -> String {
    let mut out = Vec::new();
    let first = at.saturating_sub(OUTPUT_CONTEXT);
    let last = (at + OUTPUT_CONTEXT).min(lines.len() - 1);
    for (i, line) in lines.iter().enumerate().take(last + 1).skip(first) {
        let marker = if i == at { "→ " } else { "  " };
        out.push(format!("{marker}{line}"));
    }
    if let Some(number) = config_line_named(lines[at]).filter(|n| (1..=config.len()).contains(n)) {
        out.push("  Config context:".to_owned());
        let first = number.saturating_sub(CONFIG_BEFORE).max(1);
        let last = (number + CONFIG_AFTER).min(config.len());
        for n in first..=last {
            let marker = if n == number { "→ " } else { "  " };
            // Only the lines shown are scrubbed, not the whole render.
            out.push(format!("  {marker}{n:4}  {}", scrub(config[n - 1])));
        }
    }
    out.join("\n")
}

/// The LINE of the first `[FILE:LINE]` in `line` whose FILE is the config.
fn config_line_named(line: &str) -> Option<usize> {
    let mut rest = line;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find(']') else { break };
        let inside = &rest[..close];
        if let Some((file, number)) = inside.rsplit_once(':') {
            let file = file.trim_start_matches("./");
            if file == super::layout::CONFIG_NAME && !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit()) {
                return number.parse().ok();
            }
        }
    }
    None
}

/// A trailing quote of unexplained output, cut to a readable size.
fn quoted(output: &str) -> String {
    let trimmed = output.trim();
    if trimmed.is_empty() {
        return String::new();
    }
    if trimmed.len() <= QUOTE_LIMIT {
        return format!(": {trimmed}");
    }
    let mut cut = QUOTE_LIMIT;
    while !trimmed.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(": {} … ({} more bytes)", &trimmed[..cut], trimmed.len() - cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "/tmp/rendergate-check-Ab12Cd";
    const BIN: &str = "/usr/sbin/haproxy";

    fn run(exit: Exit, output: &str, config: &str) -> CheckOutcome {
        classify(exit, output, config, Path::new(DIR), Path::new(BIN))
    }

    const CONFIG: &str = "global\n  log stdout local0\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind :8080\n  bogus\n  default_backend b\nbackend b\n  server s1 127.0.0.1:80\n";

    const UNKNOWN_KEYWORD: &str = "\
[NOTICE]   (1913) : haproxy version is 2.6.12-1+deb12u3
[NOTICE]   (1913) : path to executable is /usr/sbin/haproxy
[ALERT]    (1913) : config : parsing [haproxy.cfg:10] : unknown keyword 'bogus' in 'frontend' section
[ALERT]    (1913) : config : Error(s) found in configuration file : haproxy.cfg
[ALERT]    (1913) : config : Fatal errors found in configuration.
";

    #[test]
    fn exit_zero_passes_quietly() {
        let out = run(Exit::Code(0), "Configuration file is valid\n", CONFIG);
        assert_eq!(out, CheckOutcome::Passed { message: String::new() });
    }

    #[test]
    fn exit_zero_with_warnings_passes_and_says_so() {
        let output = "\
[NOTICE]   (3521) : haproxy version is 2.6.12-1+deb12u3
[NOTICE]   (3521) : path to executable is /usr/sbin/haproxy
[WARNING]  (3521) : config : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems
   | with such a configuration. To fix this, please ensure that all following
   | timeouts are set to a non-zero value: 'client', 'connect', 'server'.
Warnings were found.
Configuration file is valid
";
        let CheckOutcome::Passed { message } = run(Exit::Code(0), output, CONFIG) else { panic!() };
        assert!(message.starts_with("HAProxy warned:\n[WARNING]  (3521) : config : missing timeouts"), "{message}");
        assert!(message.contains("   | timeouts are set to a non-zero value"), "{message}");
        assert!(!message.contains("NOTICE"), "{message}");
        assert!(!message.contains("Configuration file is valid"), "{message}");
    }

    #[test]
    fn an_alert_refuses_with_output_and_config_context() {
        let CheckOutcome::Refused { message } = run(Exit::Code(1), UNKNOWN_KEYWORD, CONFIG) else { panic!() };
        let expected = [
            "  [NOTICE]   (1913) : haproxy version is 2.6.12-1+deb12u3",
            "  [NOTICE]   (1913) : path to executable is haproxy",
            "→ [ALERT]    (1913) : config : parsing [haproxy.cfg:10] : unknown keyword 'bogus' in 'frontend' section",
            "  [ALERT]    (1913) : config : Error(s) found in configuration file : haproxy.cfg",
            "  [ALERT]    (1913) : config : Fatal errors found in configuration.",
            "  Config context:",
            "       6    timeout server 1s",
            "       7    timeout connect 1s",
            "       8  frontend f",
            "       9    bind :8080",
            "  →   10    bogus",
            "      11    default_backend b",
            "      12  backend b",
            "      13    server s1 127.0.0.1:80",
        ]
        .join("\n");
        assert_eq!(message, expected);
    }

    #[test]
    fn every_judging_tag_refuses_even_indented() {
        for tag in ["[EMERG]", "[ALERT]", "[CRIT]", "[ERR]"] {
            let output = format!("[NOTICE] x\n   {tag}    (1) : something broke\n");
            let out = run(Exit::Code(1), &output, CONFIG);
            let CheckOutcome::Refused { message } = out else { panic!("{tag}: {out:?}") };
            assert!(message.contains(&format!("→    {tag}    (1) : something broke")), "{message}");
            assert!(!message.contains("Config context"), "{message}");
        }
    }

    #[test]
    fn tags_in_the_middle_of_a_line_do_not_judge() {
        let out = run(Exit::Code(1), "[WARNING] (1) : the word [ALERT] appears here\n", CONFIG);
        assert!(matches!(out, CheckOutcome::Passed { .. }), "{out:?}");
    }

    #[test]
    fn each_alert_gets_its_own_block_and_summaries_none() {
        let output = "\
[NOTICE]   (7) : haproxy version is 2.6.12-1+deb12u3
[NOTICE]   (7) : path to executable is /usr/sbin/haproxy
[ALERT]    (7) : config : parsing [haproxy.cfg:2] : unknown keyword 'one' in 'global' section
[ALERT]    (7) : config : parsing [haproxy.cfg:12] : unknown keyword 'two' in 'backend' section
[ALERT]    (7) : config : Error(s) found in configuration file : haproxy.cfg
[ALERT]    (7) : config : Fatal errors found in configuration.
";
        let CheckOutcome::Refused { message } = run(Exit::Code(1), output, CONFIG) else { panic!() };
        let blocks: Vec<&str> = message.split("\n\n").collect();
        assert_eq!(blocks.len(), 2, "{message}");
        assert!(blocks[0].contains("→ [ALERT]    (7) : config : parsing [haproxy.cfg:2]"));
        assert!(blocks[0].contains("  [ALERT]    (7) : config : parsing [haproxy.cfg:12]"));
        assert!(blocks[0].contains("  →    2    log stdout local0"), "{}", blocks[0]);
        assert!(blocks[0].contains("       1  global"), "{}", blocks[0]);
        assert!(blocks[0].contains("       5    timeout client 1s"), "{}", blocks[0]);
        assert!(!blocks[0].contains("       6"), "{}", blocks[0]);
        assert!(blocks[1].starts_with("  [NOTICE]   (7) : haproxy version is"), "{}", blocks[1]);
        assert!(blocks[1].contains("→ [ALERT]    (7) : config : parsing [haproxy.cfg:12]"));
        assert!(blocks[1].contains("  →   12  backend b"), "{}", blocks[1]);
        assert!(blocks[1].ends_with("      13    server s1 127.0.0.1:80"), "{}", blocks[1]);
        assert!(!message.contains("→ [ALERT]    (7) : config : Error(s)"));
        assert!(!message.contains("→ [ALERT]    (7) : config : Fatal"));
    }

    #[test]
    fn only_summary_lines_still_refuse_with_something_to_read() {
        let output = "[ALERT]    (7) : config : Fatal errors found in configuration.\n";
        let CheckOutcome::Refused { message } = run(Exit::Code(1), output, CONFIG) else { panic!() };
        assert_eq!(message, "→ [ALERT]    (7) : config : Fatal errors found in configuration.");
    }

    #[test]
    fn absolute_config_paths_are_made_relative_and_get_context() {
        let output = format!(
            "[ALERT]    (9) : config : parsing [{DIR}/haproxy.cfg:1] : unknown keyword 'x'\n\
             [ALERT]    (9) : config : failed to open pattern file <{DIR}/maps/hosts.map> in {DIR}\n"
        );
        let CheckOutcome::Refused { message } = run(Exit::Code(1), &output, CONFIG) else { panic!() };
        assert!(!message.contains(DIR), "{message}");
        assert!(!message.contains("/tmp"), "{message}");
        assert!(message.contains("parsing [haproxy.cfg:1]"), "{message}");
        assert!(message.contains("<maps/hosts.map> in ."), "{message}");
        assert!(message.contains("  →    1  global"), "{message}");
    }

    #[test]
    fn other_files_line_numbers_get_no_config_context() {
        let output = "[ALERT]    (9) : config : parsing [general/list.txt:3] : bad crt-list line\n";
        let CheckOutcome::Refused { message } = run(Exit::Code(1), output, CONFIG) else { panic!() };
        assert!(!message.contains("Config context"), "{message}");
    }

    #[test]
    fn line_numbers_beyond_the_config_get_no_context() {
        for n in ["0", "14", "999999999999999999999999"] {
            let output = format!("[ALERT]    (9) : config : parsing [haproxy.cfg:{n}] : oops\n");
            let CheckOutcome::Refused { message } = run(Exit::Code(1), &output, CONFIG) else { panic!() };
            assert!(!message.contains("Config context"), "{n}: {message}");
        }
        let output = "[ALERT]    (9) : config : parsing [haproxy.cfg:13] : last line\n";
        let CheckOutcome::Refused { message } = run(Exit::Code(1), output, CONFIG) else { panic!() };
        assert!(message.ends_with("  →   13    server s1 127.0.0.1:80"), "{message}");
        assert!(message.contains("       9    bind :8080"), "{message}");
        assert!(!message.contains("       8  "), "{message}");
    }

    #[test]
    fn no_listener_exit_two_passes_with_a_warning() {
        let output = "Configuration file has no error but will not start (no listener) => exit(2).\n";
        let out = run(Exit::Code(2), output, "global\n");
        assert_eq!(
            out,
            CheckOutcome::Passed { message: "valid, but HAProxy would not start it: no listener (exit 2)".into() }
        );
    }

    #[test]
    fn non_zero_with_only_advisory_lines_passes() {
        let output = "\
[NOTICE]   (3576) : haproxy version is 2.6.12-1+deb12u3
[WARNING]  (3576) : config : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems

[INFO]     (3576) : something
[DEBUG]    (3576) : something else
";
        let CheckOutcome::Passed { message } = run(Exit::Code(1), output, CONFIG) else { panic!() };
        assert!(
            message.starts_with("valid: HAProxy exited 1 but printed only advisory lines\nHAProxy warned:\n"),
            "{message}"
        );
        assert!(message.contains("   | While not properly invalid"), "{message}");
    }

    #[test]
    fn zero_warning_abort_is_a_refusal() {
        let output = "\
[NOTICE]   (3576) : haproxy version is 2.6.12-1+deb12u3
[WARNING]  (3576) : config : missing timeouts for frontend 'f'.
   | While not properly invalid, you will certainly encounter various problems
[ALERT]    (3576) : config : Some warnings were found and 'zero-warning' is set. Aborting.
";
        let CheckOutcome::Refused { message } = run(Exit::Code(1), output, CONFIG) else { panic!() };
        assert!(message.contains("→ [ALERT]    (3576) : config : Some warnings were found"), "{message}");
        assert!(message.starts_with("  [NOTICE]"), "{message}");
    }

    #[test]
    fn unexplained_failures_are_unavailable() {
        let out = run(Exit::Code(1), "", CONFIG);
        assert_eq!(out, CheckOutcome::Unavailable { reason: "haproxy -c exited 1 with no output".into() });
        let out = run(Exit::Code(1), "\n  \n", CONFIG);
        assert!(matches!(out, CheckOutcome::Unavailable { .. }), "{out:?}");

        let out = run(Exit::Code(127), &format!("{BIN}: error while loading shared libraries in {DIR}\n"), CONFIG);
        assert_eq!(
            out,
            CheckOutcome::Unavailable {
                reason: "haproxy -c exited 127 without judging the config: haproxy: error while loading shared libraries in .".into()
            }
        );
        // a continuation line with nothing before it is not advice
        let out = run(Exit::Code(1), "   | orphan\n", CONFIG);
        assert!(matches!(out, CheckOutcome::Unavailable { .. }), "{out:?}");
        // advisory lines mixed with something unknown
        let out = run(Exit::Code(1), "[NOTICE] fine\nSegmentation fault\n", CONFIG);
        assert!(matches!(out, CheckOutcome::Unavailable { .. }), "{out:?}");
    }

    #[test]
    fn a_signal_is_unavailable_even_with_alerts() {
        let out = run(Exit::Signal(9), UNKNOWN_KEYWORD, CONFIG);
        let CheckOutcome::Unavailable { reason } = out else { panic!("{out:?}") };
        assert!(reason.starts_with("haproxy was killed by signal 9: [NOTICE]"), "{reason}");
        assert!(!reason.contains(BIN), "{reason}");
        assert_eq!(
            run(Exit::Signal(11), "", CONFIG),
            CheckOutcome::Unavailable { reason: "haproxy was killed by signal 11".into() }
        );
    }

    #[test]
    fn long_unexplained_output_is_cut() {
        let output = "é".repeat(5000);
        let CheckOutcome::Unavailable { reason } = run(Exit::Code(3), &output, CONFIG) else { panic!() };
        assert!(reason.len() < QUOTE_LIMIT + 200, "{}", reason.len());
        assert!(reason.ends_with(&format!("… ({} more bytes)", 10000 - QUOTE_LIMIT)), "{reason}");
    }

    #[test]
    fn many_alerts_are_capped() {
        let output: String =
            (1..=30).map(|n| format!("[ALERT] (1) : config : parsing [haproxy.cfg:{n}] : bad\n")).collect();
        let CheckOutcome::Refused { message } = run(Exit::Code(1), &output, CONFIG) else { panic!() };
        assert_eq!(message.matches("→ [ALERT]").count(), MAX_BLOCKS);
        assert!(message.ends_with("… and 10 more alerts"), "{message}");
    }

    #[test]
    fn sanitise_removes_host_paths_and_control_characters() {
        let text = format!("{DIR}/a {DIR} {DIR}/ {BIN} \x1b[31mred\r\n");
        assert_eq!(sanitise(&text, Path::new(DIR), Path::new(BIN)), "a .  haproxy \u{FFFD}[31mred\n");
        // a trailing slash on the directory changes nothing
        assert_eq!(sanitise(&format!("{DIR}/x"), Path::new(&format!("{DIR}/")), Path::new(BIN)), "x");
        // a root or relative name is never used to cut paths apart
        assert_eq!(sanitise("/usr/sbin/x", Path::new("/"), Path::new("haproxy")), "/usr/sbin/x");
    }

    #[test]
    fn config_context_is_scrubbed_too() {
        let config = "global\n  bogus \x1b[2J\n";
        let output = "[ALERT] (1) : config : parsing [haproxy.cfg:2] : unknown keyword 'bogus'\n";
        let CheckOutcome::Refused { message } = run(Exit::Code(1), output, config) else { panic!() };
        assert!(message.contains("  →    2    bogus \u{FFFD}[2J"), "{message}");
        assert!(!message.contains('\x1b'));
    }
}
