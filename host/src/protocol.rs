//! The NDJSON stream of `rendergate serve` (docs/protocol.md §2): one input line
//! into one [`Event`], one [`Output`] into one output line. A bad line is a
//! [`LineError`] naming its line number; it never reaches the gate.

use crate::core::{CheckOutcome, Event, LatchState, PodReport};
use crate::policy::RevertTarget;
use crate::render::{Render, RenderFile};
use crate::runtime::Output;
use policy_core::Name;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// One input line, as docs/protocol.md spells it. Unknown fields are ignored.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Input {
    Rendered {
        plan: String,
        render: String,
        #[serde(default)]
        correlation: Option<String>,
        config: String,
        #[serde(default)]
        files: Vec<RenderFile>,
    },
    Applied {
        pod: String,
        plan: String,
        #[serde(default)]
        render: Option<String>,
        #[serde(default)]
        running_plan: Option<String>,
        #[serde(default)]
        baseline_plan: Option<String>,
    },
    PodTerminated {
        pod: String,
    },
    PodsDiscovered {
        pods: Vec<String>,
    },
    LostLeadership {},
}

/// Every field any input type has, in one flat struct: parsed in one pass
/// with no intermediate tree, names borrowed from the line where JSON allows
/// (no escapes). A line this cannot take as a complete event goes the slow
/// way, through [`Input`], which says precisely what is wrong.
#[derive(Deserialize)]
struct Fields<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(default, borrow)]
    pod: Option<Text<'a>>,
    #[serde(default, borrow)]
    plan: Option<Text<'a>>,
    #[serde(default, borrow)]
    render: Option<Text<'a>>,
    #[serde(default, borrow)]
    running_plan: Option<Text<'a>>,
    #[serde(default, borrow)]
    baseline_plan: Option<Text<'a>>,
    #[serde(default)]
    correlation: Option<String>,
    #[serde(default)]
    config: Option<String>,
    // Not `Option`: `"files": null` must fail here as it does the slow way.
    #[serde(default)]
    files: Vec<RenderFile>,
    #[serde(default)]
    pods: Option<Vec<String>>,
}

/// A string borrowed from the line when it has no escapes. (serde borrows
/// a `Cow` only when it is a field of its own, not inside an `Option`.)
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// The fast way: a well-formed line of a known type, or `None`.
fn parse_fields(text: &str) -> Option<Event> {
    // serde reads a struct from a JSON array too; the protocol wants objects.
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let f: Fields<'_> = serde_json::from_str(text).ok()?;
    let name = |t: Text<'_>| Name::from(&*t.0);
    Some(match &*f.kind.0 {
        "applied" => Event::Applied(PodReport {
            pod: name(f.pod?),
            render: f.render.map(name),
            plan: name(f.plan?),
            running_plan: f.running_plan.map(name),
            baseline_plan: f.baseline_plan.map(name),
        }),
        "rendered" => Event::Rendered(
            Render::new(f.plan?.0.into_owned(), f.render?.0.into_owned(), f.config?, f.files)
                .with_correlation(f.correlation),
        ),
        "pod_terminated" => Event::PodTerminated { pod: f.pod?.0.into_owned() },
        "pods_discovered" => Event::PodsDiscovered { pods: f.pods? },
        "lost_leadership" => Event::LostLeadership,
        _ => return None,
    })
}

/// A line that could not become an event.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LineError {
    /// Counted from 1 over all input lines, blank ones included.
    pub line: u64,
    pub message: String,
}

/// The input types docs/protocol.md knows.
const INPUT_TYPES: [&str; 5] = ["rendered", "applied", "pod_terminated", "pods_discovered", "lost_leadership"];

/// Parses one input line. Blank lines are `Ok(None)`.
pub fn parse_line(line: u64, text: &str) -> Result<Option<Event>, LineError> {
    if text.trim().is_empty() {
        return Ok(None);
    }
    if let Some(event) = parse_fields(text) {
        return Ok(Some(event));
    }
    parse_input(line, text).map(Some)
}

/// The slow way: through a JSON tree, so that a bad line gets a precise error.
fn parse_input(line: u64, text: &str) -> Result<Event, LineError> {
    let fail = |message: String| LineError { line, message };
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| fail(format!("not valid JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(fail("expected a JSON object".into()));
    };
    match object.get("type") {
        None => return Err(fail("missing field `type`".into())),
        Some(serde_json::Value::String(t)) if INPUT_TYPES.contains(&t.as_str()) => {}
        Some(serde_json::Value::String(t)) => {
            return Err(fail(format!("unknown type `{t}`, expected one of {}", INPUT_TYPES.join(", "))));
        }
        Some(other) => return Err(fail(format!("field `type` must be a string, not {other}"))),
    }
    // Moves the strings out of the parsed value: no second copy of a big config.
    let input: Input = serde_json::from_value(value).map_err(|e| fail(e.to_string()))?;
    Ok(match input {
        Input::Rendered { plan, render, correlation, config, files } => {
            Event::Rendered(Render::new(plan, render, config, files).with_correlation(correlation))
        }
        Input::Applied { pod, plan, render, running_plan, baseline_plan } => Event::Applied(PodReport {
            pod: pod.into(),
            render: render.map(Into::into),
            plan: plan.into(),
            running_plan: running_plan.map(Into::into),
            baseline_plan: baseline_plan.map(Into::into),
        }),
        Input::PodTerminated { pod } => Event::PodTerminated { pod },
        Input::PodsDiscovered { pods } => Event::PodsDiscovered { pods },
        Input::LostLeadership {} => Event::LostLeadership,
    })
}

/// One output line, field order as docs/protocol.md shows it (`type` first).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Line<'a> {
    Verdict {
        plan: &'a str,
        render: &'a str,
        checksum: &'a str,
        ok: bool,
        refused: bool,
        newest: bool,
        pinned: bool,
        remembered: bool,
        message: &'a str,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        correlation: Option<&'a str>,
    },
    Latch {
        state: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<&'static str>,
    },
    Release {
        plan: &'a str,
        render: &'a str,
    },
    Promote {
        pod: &'a str,
        plan: &'a str,
    },
    Revert {
        pod: &'a str,
        plan: &'a str,
        to: &'a str,
    },
    Error {
        line: u64,
        message: &'a str,
    },
}

/// The output line for `output` (without the newline).
pub fn output_line(output: &Output) -> String {
    let line = match output {
        Output::Verdict(v) => Line::Verdict {
            plan: &v.plan,
            render: &v.render,
            checksum: v.checksum.as_str(),
            ok: matches!(v.outcome, CheckOutcome::Passed { .. }),
            refused: matches!(v.outcome, CheckOutcome::Refused { .. }),
            newest: v.newest,
            pinned: v.pinned.is_some(),
            remembered: v.remembered,
            message: v.outcome.message(),
            duration_ms: v.duration.as_millis() as u64,
            correlation: v.correlation.as_deref(),
        },
        Output::Latch(LatchState::Optimistic) => Line::Latch { state: "optimistic", reason: None },
        Output::Latch(LatchState::Pessimistic(reason)) => {
            Line::Latch { state: "pessimistic", reason: Some(reason.as_str()) }
        }
        Output::Release { plan, render } => Line::Release { plan, render },
        Output::Promote(p) => Line::Promote { pod: &p.pod, plan: &p.plan },
        Output::Revert(r) => Line::Revert {
            pod: &r.pod,
            plan: &r.plan,
            to: match &r.target {
                RevertTarget::Baseline => "baseline",
                RevertTarget::Plan(plan) => plan,
            },
        },
    };
    serde_json::to_string(&line).expect("output lines always serialize")
}

/// The `error` output line for a bad input line.
pub fn error_line(error: &LineError) -> String {
    serde_json::to_string(&Line::Error { line: error.line, message: &error.message })
        .expect("error lines always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Reason, Verdict};
    use crate::policy::Revert;
    use crate::render::FileKind;
    use std::time::Duration;

    #[test]
    fn parses_every_input_type() {
        let line = r#"{"type":"rendered","plan":"plan-1","render":"r-1","correlation":"c-1","config":"global\n","files":[{"kind":"crt-list","path":"a.lst","content":"x"}],"extra":1}"#;
        let Some(Event::Rendered(r)) = parse_line(1, line).unwrap() else { panic!() };
        assert_eq!((r.plan(), r.id(), r.correlation()), ("plan-1", "r-1", Some("c-1")));
        assert_eq!(r.files()[0].kind, FileKind::CrtList);

        let Some(Event::Applied(a)) =
            parse_line(2, r#"{"type":"applied","pod":"ns/a","plan":"p","running_plan":null}"#).unwrap()
        else {
            panic!()
        };
        assert_eq!((a.render, a.running_plan, a.baseline_plan), (None, None, None));
        assert!(matches!(
            parse_line(3, r#"{"type":"pod_terminated","pod":"ns/a"}"#),
            Ok(Some(Event::PodTerminated { .. }))
        ));
        assert!(matches!(
            parse_line(4, r#"{"type":"pods_discovered","pods":[]}"#),
            Ok(Some(Event::PodsDiscovered { .. }))
        ));
        assert!(matches!(parse_line(5, r#"{"type":"lost_leadership"}"#), Ok(Some(Event::LostLeadership))));
        assert!(matches!(parse_line(6, "   "), Ok(None)));
    }

    #[test]
    fn the_fast_and_the_slow_way_read_every_valid_line_alike() {
        let lines = [
            r#"{"type":"applied","pod":"ns/a","plan":"p1","render":"r-1","running_plan":"p0","baseline_plan":null}"#,
            r#"{"plan":"p\u00e9\n","pod":"ns/\"b\"","type":"applied","extra":{"x":[1,2]}}"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1","correlation":"c","config":"global\n","files":[{"kind":"map","path":"maps/a.map","content":"x"}]}"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1","config":""}"#,
            r#"{"type":"pod_terminated","pod":"ns/a"}"#,
            r#"{"type":"pods_discovered","pods":["ns/a","ns/b"]}"#,
            r#"{"type":"lost_leadership","since":"now"}"#,
        ];
        for line in lines {
            let fast = parse_fields(line).unwrap_or_else(|| panic!("the fast way takes {line}"));
            let slow = parse_input(1, line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(format!("{fast:?}"), format!("{slow:?}"), "{line}");
        }
        // Names without escapes are borrowed from the line, not copied first.
        let f: Fields<'_> = serde_json::from_str(lines[0]).unwrap();
        assert!(matches!(f.pod.map(|t| t.0), Some(Cow::Borrowed("ns/a"))));
        // Lines the fast way declines, so the slow way can say what is wrong.
        for line in [
            r#"{"type":"applied","plan":"p1"}"#,
            r#"{"type":"applied","pod":null,"plan":"p1"}"#,
            r#"{"type":"applied","pod":5,"plan":"p1"}"#,
            r#"{"type":"bogus","pod":"ns/a"}"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1"}"#,
            r#"{"pod":"ns/a"}"#,
            r#"["lost_leadership"]"#,
            r#"["applied","ns/a","p1"]"#,
            r#"{"type":"rendered","plan":"p1","render":"r-1","config":"","files":null}"#,
        ] {
            assert!(parse_fields(line).is_none(), "{line}");
            assert!(parse_line(1, line).is_err(), "{line}");
        }
    }

    #[test]
    fn bad_lines_name_the_line_and_the_problem() {
        let cases = [
            ("{not json", "not valid JSON"),
            (r#"{"type":"nope"}"#, "unknown type `nope`"),
            (r#"{"plan":"p"}"#, "missing field `type`"),
            (r#"{"type":"rendered","plan":"p","render":"r"}"#, "missing field `config`"),
            (r#"{"type":"applied","pod":"a","plan":7}"#, "invalid type: integer `7`, expected a string"),
            (
                r#"{"type":"rendered","plan":"p","render":"r","config":"","files":[{"kind":"tls","path":"a","content":""}]}"#,
                "unknown variant `tls`",
            ),
            (r#"[1,2]"#, "expected a JSON object"),
            (r#"{"type":5}"#, "field `type` must be a string"),
        ];
        for (text, expected) in cases {
            let e = parse_line(7, text).unwrap_err();
            assert_eq!(e.line, 7);
            assert!(e.message.contains(expected), "{text}: {}", e.message);
        }
    }

    #[test]
    fn output_lines_follow_the_protocol_field_order() {
        let v = Verdict {
            plan: "plan-1".into(),
            render: "r-1".into(),
            checksum: Render::new("p", "r", "", vec![]).checksum().clone(),
            correlation: Some("c-1".into()),
            outcome: CheckOutcome::Refused { message: "bad".into() },
            newest: true,
            pinned: Some(Reason::Refused),
            remembered: false,
            duration: Duration::from_millis(87),
        };
        let line = output_line(&Output::Verdict(v));
        let keys: Vec<&str> = line
            .split('"')
            .skip(1)
            .step_by(2)
            .filter(|k| {
                [
                    "type",
                    "plan",
                    "render",
                    "checksum",
                    "ok",
                    "refused",
                    "newest",
                    "pinned",
                    "remembered",
                    "message",
                    "duration_ms",
                    "correlation",
                ]
                .contains(k)
            })
            .collect();
        assert_eq!(
            keys,
            [
                "type",
                "plan",
                "render",
                "checksum",
                "ok",
                "refused",
                "newest",
                "pinned",
                "remembered",
                "message",
                "duration_ms",
                "correlation"
            ]
        );
        assert!(line.starts_with(r#"{"type":"verdict","plan":"plan-1","render":"r-1","checksum":"sha256:"#));
        assert!(line.ends_with(r#""ok":false,"refused":true,"newest":true,"pinned":true,"remembered":false,"message":"bad","duration_ms":87,"correlation":"c-1"}"#));

        assert_eq!(
            output_line(&Output::Latch(LatchState::Pessimistic(Reason::Unavailable))),
            r#"{"type":"latch","state":"pessimistic","reason":"unavailable"}"#
        );
        assert_eq!(output_line(&Output::Latch(LatchState::Optimistic)), r#"{"type":"latch","state":"optimistic"}"#);
        let revert = Revert { pod: "ns/a".into(), plan: "plan-2".into(), target: RevertTarget::Plan("plan-1".into()) };
        assert_eq!(
            output_line(&Output::Revert(revert)),
            r#"{"type":"revert","pod":"ns/a","plan":"plan-2","to":"plan-1"}"#
        );
        assert_eq!(
            error_line(&LineError { line: 3, message: "x".into() }),
            r#"{"type":"error","line":3,"message":"x"}"#
        );
    }
}
