//! rendergate-timeline: the timeline of a replay, one picture an operator reads at a glance
//! (`rendergate replay EVENTS --timeline FILE.svg|FILE.html`).
//!
//! # Guide
//!
//! **Owns** turning a run's input and output lines, each with the time it happened, into one
//! SVG document (or an HTML page around it), written once, directly, in its target format.
//!
//! **Never depends on** the gate (`rendergate-core`), a runtime, processes or the protocol
//! code of `rendergate`: it reads the lines as JSON on its own, only the fields it draws
//! (docs/protocol.md), so the picture can never change what the gate decides. Nor on a
//! plotting or XML library: the picture is a few shapes, and writing them is ours.
//!
//! **Start reading** at [`Timeline`] below; then `run.rs` (what the run did, in rows and
//! milliseconds), `draw.rs` (where everything goes and how it looks), `legend.rs`, `axis.rs`
//! (the time ticks) and `svg.rs` (the writer: escaping, groups with a title).
//!
//! # The picture
//!
//! On one time axis:
//!
//! - the latch as a band: optimistic, or pessimistic and why;
//! - one row per render: when it arrived, each check as a bar from its start
//!   (the verdict's time less its `duration_ms`) to its verdict, coloured
//!   pass / refused / could not run, a remembered verdict as a diamond (no
//!   check ran), its release as a flag;
//! - one row per pod: its reports (`applied`), promotions and reverts;
//! - bad input lines, and leadership losses across every row;
//! - a legend.
//!
//! Each check, mark and latch segment is a `<g class="check refused">`-style
//! group whose first child is a `<title>`: a browser shows the details
//! (HAProxy's message, the times) on hover, and a program finds every check
//! as `g.check`. Every text that comes from the run (plan, render and pod
//! names, HAProxy's messages) is escaped, so no input can add markup.
//! `.html` puts the SVG in a minimal page.

mod axis;
mod draw;
mod legend;
mod run;
mod svg;

use run::{Line, Run};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The timeline could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct TimelineError {
    path: PathBuf,
    source: std::io::Error,
}

/// A run's inputs and outputs in time, to be drawn.
pub struct Timeline {
    title: String,
    lines: Vec<(Duration, Line)>,
}

impl Timeline {
    /// `title` heads the picture (e.g. the replayed file's name).
    pub fn new(title: impl Into<String>) -> Self {
        Timeline { title: title.into(), lines: Vec::new() }
    }

    /// An input line fed at `at`; what is not a protocol event is left out.
    pub fn input(&mut self, at: Duration, line: &str) {
        self.lines.extend(Line::input(line).map(|line| (at, line)));
    }

    /// An output line written at `at`.
    pub fn output(&mut self, at: Duration, line: &str) {
        self.lines.extend(Line::output(line).map(|line| (at, line)));
    }

    /// The picture as an SVG document.
    pub fn svg(&self) -> String {
        draw::draw(&Run::build(&self.lines), &self.title)
    }

    /// The picture in a minimal HTML page.
    pub fn html(&self) -> String {
        let svg = self.svg();
        let title = svg::Escaped(&self.title);
        format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>{title}</title>\n\
             <style>body {{ font-family: sans-serif; margin: 16px; color: #222; }} \
             svg g[class]:hover {{ opacity: 0.75; cursor: default; }}</style>\n</head>\n<body>\n\
             <p>Hover a check, a mark or the latch band for details.</p>\n{svg}</body>\n</html>\n"
        )
    }

    /// Writes the picture to `path`: `.html`/`.htm` a page, anything else SVG.
    pub fn write(&self, path: &Path) -> Result<(), TimelineError> {
        let text = if is_html(path) { self.html() } else { self.svg() };
        std::fs::write(path, text).map_err(|source| TimelineError { path: path.to_owned(), source })
    }
}

/// Whether `path` names an HTML page (else an SVG file).
pub fn is_html(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Timeline {
        let mut t = Timeline::new("sample");
        let at = Duration::from_millis;
        t.input(at(0), r#"{"type":"pods_discovered","pods":["ns/a","ns/b"]}"#);
        t.input(at(1), r#"{"type":"rendered","plan":"plan-1","render":"r-1","config":""}"#);
        t.output(at(40), r#"{"type":"verdict","plan":"plan-1","render":"r-1","checksum":"x","ok":true,"refused":false,"newest":true,"pinned":false,"remembered":false,"message":"","duration_ms":38}"#);
        t.input(
            at(50),
            r#"{"type":"applied","pod":"ns/a","plan":"plan-1","running_plan":"plan-1"}"#,
        );
        t.output(at(51), r#"{"type":"promote","pod":"ns/a","plan":"plan-1"}"#);
        t.input(at(60), r#"{"type":"rendered","plan":"plan-2","render":"r-2","config":""}"#);
        t.output(at(100), r#"{"type":"verdict","plan":"plan-2","render":"r-2","checksum":"y","ok":false,"refused":true,"newest":true,"pinned":false,"remembered":false,"message":"[ALERT] <bad> & worse","duration_ms":39}"#);
        t.output(at(100), r#"{"type":"latch","state":"pessimistic","reason":"refused"}"#);
        t.output(at(101), r#"{"type":"revert","pod":"ns/b","plan":"plan-2","to":"baseline"}"#);
        t.output(at(110), r#"{"type":"error","line":7,"message":"not valid JSON"}"#);
        t.input(at(120), r#"{"type":"rendered","plan":"plan-2","render":"r-3","config":""}"#);
        t.output(at(120), r#"{"type":"verdict","plan":"plan-2","render":"r-3","checksum":"y","ok":false,"refused":true,"newest":true,"pinned":true,"remembered":true,"message":"","duration_ms":0}"#);
        t.input(at(130), r#"{"type":"rendered","plan":"plan-3","render":"r-4","config":""}"#);
        t.output(at(170), r#"{"type":"verdict","plan":"plan-3","render":"r-4","checksum":"z","ok":true,"refused":false,"newest":true,"pinned":false,"remembered":false,"message":"","duration_ms":35}"#);
        t.output(at(170), r#"{"type":"latch","state":"optimistic"}"#);
        t.output(at(170), r#"{"type":"release","plan":"plan-3","render":"r-4"}"#);
        t
    }

    fn class_of(n: &roxmltree::Node) -> String {
        n.attribute("class").unwrap_or("").to_owned()
    }

    fn texts<'a>(doc: &'a roxmltree::Document) -> Vec<&'a str> {
        doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).collect()
    }

    #[test]
    fn a_held_term_start_is_drawn_and_keyed_and_a_hello_line_is_ignored() {
        let mut t = Timeline::new("held");
        let at = Duration::from_millis;
        t.output(at(0), r#"{"type":"hello","protocol":1,"version":"0.1.0","policy":"default","haproxy":"2.6","sandbox":"strict"}"#);
        t.output(at(0), r#"{"type":"latch","state":"pessimistic","reason":"term-start"}"#);
        t.input(at(1), r#"{"type":"rendered","plan":"plan-1","render":"r-1","config":""}"#);
        t.output(at(40), r#"{"type":"verdict","plan":"plan-1","render":"r-1","checksum":"x","ok":true,"refused":false,"newest":true,"pinned":false,"remembered":false,"message":"","duration_ms":38}"#);
        t.output(at(40), r#"{"type":"latch","state":"optimistic"}"#);
        let svg = t.svg();
        assert!(svg.contains("latch pessimistic: term start"), "the legend keys it");
        assert!(svg.contains("pessimistic (term start)"), "the band's segment says so");
        let plain = Timeline::new("plain");
        assert!(!plain.svg().contains("term start"), "no key for what is never drawn");
    }

    #[test]
    fn one_group_per_check_and_the_svg_parses() {
        let svg = sample().svg();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let checks: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("g") && class_of(n).starts_with("check "))
            .map(|n| class_of(&n))
            .collect();
        assert_eq!(checks, ["check pass", "check refused", "check pass"]);
        let titles: Vec<&str> = doc
            .descendants()
            .filter(|n| n.has_tag_name("title"))
            .filter_map(|n| n.text())
            .collect();
        assert!(titles.iter().any(|t| t.contains("[ALERT] <bad> & worse")), "{titles:?}");
        for class in [
            "mark remembered",
            "mark release",
            "mark promote",
            "mark revert",
            "mark error",
            "latch pessimistic",
        ] {
            assert!(
                doc.descendants().any(|n| n.has_tag_name("g") && class_of(&n) == class),
                "{class}"
            );
        }
    }

    #[test]
    fn html_wraps_the_svg() {
        let html = sample().html();
        let doc = roxmltree::Document::parse_with_options(
            &html,
            roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() },
        )
        .unwrap();
        assert!(doc.descendants().any(|n| n.has_tag_name("svg")));
    }

    #[test]
    fn every_group_is_titled_and_holds_its_shape_and_label() {
        let mut t = sample();
        let at = Duration::from_millis;
        t.input(at(140), r#"{"type":"pod_terminated","pod":"ns/b"}"#);
        t.input(at(150), r#"{"type":"lost_leadership"}"#);
        t.input(at(155), r#"{"type":"rendered","plan":"plan-5","render":"r-5","config":""}"#);
        t.output(at(180), r#"{"type":"verdict","plan":"plan-5","render":"r-5","ok":false,"refused":false,"newest":true,"remembered":false,"message":"timed out","duration_ms":20}"#);
        let svg = t.svg();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let root = doc.root_element();
        assert_eq!(root.first_element_child().map(|n| n.tag_name().name()), Some("title"));
        assert_eq!(
            root.first_element_child().and_then(|n| n.text()),
            Some("rendergate timeline: sample")
        );

        let groups: Vec<roxmltree::Node> =
            doc.descendants().filter(|n| n.has_tag_name("g")).collect();
        for g in &groups {
            let first = g.first_element_child().unwrap();
            assert!(
                first.has_tag_name("title") && !first.text().unwrap_or("").is_empty(),
                "{}",
                class_of(g)
            );
            assert!(
                g.children().filter(|n| n.is_element()).count() >= 2,
                "{} holds a shape",
                class_of(g)
            );
        }
        let count = |class: &str| groups.iter().filter(|g| class_of(g) == class).count();
        assert_eq!(count("check could-not-run"), 1);
        assert_eq!(count("mark rendered"), 5, "one arrival per render");
        assert_eq!(count("mark applied"), 1);
        assert_eq!((count("mark terminated"), count("mark lost-leadership")), (1, 1));
        assert_eq!(
            (count("latch optimistic"), count("latch pessimistic")),
            (2, 1),
            "the band: three stretches"
        );
        let dashed = doc
            .descendants()
            .filter(|n| n.has_tag_name("line") && n.has_attribute("stroke-dasharray"));
        assert_eq!(dashed.count(), 1, "the leadership loss crosses every row");

        // A check's label sits in its group, beside its bar.
        let passed = groups.iter().find(|g| class_of(g) == "check pass").unwrap();
        assert_eq!(
            passed.descendants().find(|n| n.has_tag_name("text")).and_then(|n| n.text()),
            Some("passed 38 ms")
        );

        let texts = texts(&doc);
        for row in [
            "latch",
            "render r-1 (plan-1)",
            "render r-5 (plan-5)",
            "pod ns/a",
            "pod ns/b",
            "input errors",
        ] {
            assert!(texts.contains(&row), "row {row:?} in {texts:?}");
        }
        for entry in
            ["Legend", "check could not run", "pod terminated", "bad input line", "lost leadership"]
        {
            assert!(texts.contains(&entry), "legend entry {entry:?}");
        }
        assert!(texts.contains(&"time since the start of the run (ms)"));
        for tick in ["0", "100", "200"] {
            assert!(texts.contains(&tick), "tick {tick}");
        }
        assert!(
            texts
                .iter()
                .any(|t| t
                    .starts_with("5 renders · 4 checks (2 passed, 1 refused, 1 could not run)"))
        );
    }

    #[test]
    fn hostile_names_and_messages_stay_text() {
        let plan = "</text><script>alert(1)</script><text>";
        let pod = "ns/<pod a=\"1\">&amp;'";
        let message = "[ALERT] ]]> <!-- x --> <![CDATA[ y ]]> \u{0}\u{1b}[31m\u{FFFF} end";
        let mut t = Timeline::new("<title>&\"</title>");
        let at = Duration::from_millis;
        let line = |v: serde_json::Value| v.to_string();
        t.input(at(0), &line(serde_json::json!({"type": "pods_discovered", "pods": [pod]})));
        t.input(at(1), &line(serde_json::json!({"type": "rendered", "plan": plan, "render": "r-<1>", "config": ""})));
        t.output(
            at(40),
            &line(serde_json::json!({"type": "verdict", "plan": plan, "render": "r-<1>", "ok": false, "refused": true,
                "newest": true, "remembered": false, "message": message, "duration_ms": 30})),
        );
        t.output(
            at(41),
            &line(
                serde_json::json!({"type": "revert", "pod": pod, "plan": plan, "to": "<baseline>"}),
            ),
        );
        t.output(
            at(50),
            &line(serde_json::json!({"type": "error", "line": 3, "message": message})),
        );

        let svg = t.svg();
        let html = t.html();
        for text in [&svg, &html] {
            let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
            let doc = roxmltree::Document::parse_with_options(text, options)
                .unwrap_or_else(|e| panic!("{e}"));
            let names: Vec<&str> =
                doc.descendants().filter(|n| n.is_element()).map(|n| n.tag_name().name()).collect();
            assert!(!names.contains(&"script") && !names.contains(&"pod"), "{names:?}");
            assert!(!doc.descendants().any(|n| n.is_comment()), "no comment from the input");
            let titles: Vec<&str> = doc
                .descendants()
                .filter(|n| n.has_tag_name("title"))
                .filter_map(|n| n.text())
                .collect();
            let seen = message.replace(['\u{0}', '\u{1b}', '\u{FFFF}'], "\u{FFFD}");
            assert!(titles.iter().any(|t| t.contains(plan) && t.contains(&seen)), "{titles:?}");
            assert!(
                titles
                    .iter()
                    .any(|t| t.starts_with(&format!("{pod} reverts {plan} to <baseline>"))),
                "{titles:?}"
            );
            assert!(
                titles.iter().any(|t| t.starts_with("input line 3: ") && t.ends_with(&seen)),
                "{titles:?}"
            );
            assert!(
                titles.contains(&"<title>&\"</title>")
                    || titles.contains(&"rendergate timeline: <title>&\"</title>")
            );
            assert!(
                texts(&doc).contains(&format!("pod {pod}").as_str()),
                "the pod's row label, whole"
            );
            assert!(texts(&doc).contains(&"rendergate timeline: <title>&\"</title>"));
        }
    }

    #[test]
    fn long_labels_keep_both_ends() {
        assert_eq!(draw::shorten("pod haptic/haproxy-0", 40), "pod haptic/haproxy-0");
        let cut =
            draw::shorten("pod ingress-controller-namespace/haproxy-ingress-deployment-3", 40);
        assert_eq!(cut.chars().count(), 40);
        assert!(
            cut.starts_with("pod ingress-") && cut.ends_with("deployment-3") && cut.contains('…'),
            "{cut}"
        );
    }
}
