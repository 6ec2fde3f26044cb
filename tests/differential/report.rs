//! The failure report: for each disagreeing case, what a person needs to
//! reproduce and understand it, cut to a readable length (a flood's output
//! is a megabyte; its head and tail say what matters).

use crate::Compared;

const CONFIG_LINES: usize = 30;
const LINE_WIDTH: usize = 160;
const JSON_CHARS: usize = 1500;
const OUTPUT_HEAD_LINES: usize = 12;
const OUTPUT_TAIL_LINES: usize = 8;
/// A regression test's case may carry dozens of certificates.
const FILES: usize = 12;

/// Every disagreement, one block each, after a one-line index.
pub fn disagreements(list: &[&Compared]) -> String {
    let mut out = format!("{} disagreement(s):\n", list.len());
    for j in list {
        out.push_str(&format!("  {:<60} gate {:<14} bare {}\n", j.case.name, gate_kind(j), j.bare));
        out.push_str(&format!("      gate: {}\n", visible(&gate_says(j), LINE_WIDTH)));
        out.push_str(&format!("      bare: {}\n", visible(&bare_says(j), LINE_WIDTH)));
        if let Some(d) = j.case.deviation {
            out.push_str(&format!(
                "      (a documented deviation expects gate {} and bare {}: {})\n",
                d.gate, d.bare, d.why
            ));
        }
    }
    for j in list {
        out.push('\n');
        out.push_str(&one(j));
    }
    out
}

fn gate_kind(j: &Compared) -> String {
    match &j.gate {
        Ok(kind) => kind.to_string(),
        Err(_) => "unreadable".to_owned(),
    }
}

/// The first line of the gate's verdict message (or what it printed).
fn gate_says(j: &Compared) -> String {
    let stdout = j.gate_run.stdout.trim();
    let message = serde_json::from_str::<serde_json::Value>(stdout)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{stdout}{}", j.gate_run.stderr.trim()));
    message.lines().find(|l| !l.trim().is_empty()).unwrap_or("(nothing)").to_owned()
}

/// Bare HAProxy's first `[ALERT]` line, else its first line.
fn bare_says(j: &Compared) -> String {
    let output = format!("{}{}", j.bare_run.stderr, j.bare_run.stdout);
    let first = output.lines().find(|l| l.contains("[ALERT]")).or_else(|| output.lines().next());
    format!("({}) {}", j.bare_run.status, first.unwrap_or("(nothing)"))
}

/// One case in full: name and seed, config head, files, both sides.
pub fn one(j: &Compared) -> String {
    let case = j.case;
    let mut out =
        format!("=== {} ({}): gate {}, bare {}\n", case.name, case.origin(), gate_kind(j), j.bare);
    let config = case.config_text();
    let lines: Vec<&str> = config.split('\n').collect();
    out.push_str(&format!("config ({} lines, {} bytes):\n", lines.len(), case.config.len()));
    for (n, line) in lines.iter().take(CONFIG_LINES).enumerate() {
        out.push_str(&format!("  {:4}  {}\n", n + 1, visible(line, LINE_WIDTH)));
    }
    if lines.len() > CONFIG_LINES {
        out.push_str(&format!("  … {} more lines\n", lines.len() - CONFIG_LINES));
    }
    for (path, content) in case.files.iter().take(FILES) {
        out.push_str(&format!(
            "file {path} ({} bytes): {}\n",
            content.len(),
            visible(&String::from_utf8_lossy(content), 120)
        ));
    }
    if case.files.len() > FILES {
        out.push_str(&format!("… {} more files\n", case.files.len() - FILES));
    }
    if let Err(problem) = &j.gate {
        out.push_str(&format!("gate unreadable: {problem}\n"));
    }
    out.push_str(&format!(
        "gate ({}): {}\n",
        j.gate_run.status,
        visible(j.gate_run.stdout.trim(), JSON_CHARS)
    ));
    if j.gate.is_err() && !j.gate_run.stderr.trim().is_empty() {
        out.push_str(&format!("gate stderr: {}\n", visible(j.gate_run.stderr.trim(), JSON_CHARS)));
    }
    let bare = format!("{}{}", j.bare_run.stderr, j.bare_run.stdout);
    out.push_str(&format!("bare ({}), {} bytes of output:\n", j.bare_run.status, bare.len()));
    let lines: Vec<&str> = bare.lines().collect();
    let show = |out: &mut String, range: &[&str]| {
        for line in range {
            out.push_str(&format!("  | {}\n", visible(line, LINE_WIDTH)));
        }
    };
    if lines.len() <= OUTPUT_HEAD_LINES + OUTPUT_TAIL_LINES {
        show(&mut out, &lines);
    } else {
        show(&mut out, &lines[..OUTPUT_HEAD_LINES]);
        out.push_str(&format!(
            "  | … {} lines …\n",
            lines.len() - OUTPUT_HEAD_LINES - OUTPUT_TAIL_LINES
        ));
        show(&mut out, &lines[lines.len() - OUTPUT_TAIL_LINES..]);
    }
    out
}

/// `text` with control characters made visible, cut to `limit` characters.
fn visible(text: &str, limit: usize) -> String {
    let mut out = String::new();
    for (i, c) in text.chars().enumerate() {
        if i == limit {
            out.push_str(&format!(" … ({} chars)", text.chars().count()));
            break;
        }
        match c {
            '\t' => out.push(' '),
            c if c.is_control() => out.extend(c.escape_debug()),
            c => out.push(c),
        }
    }
    out
}
