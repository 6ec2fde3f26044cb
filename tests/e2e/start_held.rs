//! `serve --start-held` (docs/behaviour.md, "Term start"): every leadership
//! term starts PESSIMISTIC with reason `term-start`, a `latch` line says so
//! at the start of each term, and the term's first render waits for a pass.

use crate::support::*;
use serde_json::{Value, json};

fn kinds(lines: &[Value]) -> Vec<String> {
    lines.iter().map(|l| l["type"].as_str().unwrap_or("?").to_owned()).collect()
}

fn held() -> Value {
    json!({"type": "latch", "state": "pessimistic", "reason": "term-start"})
}

#[test]
fn every_term_starts_held_and_its_first_render_waits_for_a_pass() {
    let mut gate = Serve::start(&["--start-held"]);
    // Before any input: the first term is held.
    assert_eq!(gate.next(), held());

    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let seen = gate.until("release");
    assert_eq!(kinds(&seen), ["verdict", "latch", "release"], "{seen:?}");
    assert_eq!((&seen[0]["ok"], &seen[0]["pinned"]), (&json!(true), &json!(false)));
    assert_eq!(seen[1], json!({"type": "latch", "state": "optimistic"}));
    assert_eq!(seen[2], json!({"type": "release", "plan": "plan-1", "render": "r-1"}));

    // A new term is held again, whatever the latch was.
    gate.send(&json!({"type": "lost_leadership"}));
    assert_eq!(gate.next(), held());

    // The held term's first failure is not pinned: it is not two in a row.
    gate.send(&rendered("plan-2", "r-2", &broken_config()));
    let seen = gate.until("latch");
    assert_eq!(kinds(&seen), ["verdict", "latch"], "{seen:?}");
    assert_eq!((&seen[0]["refused"], &seen[0]["pinned"]), (&json!(true), &json!(false)));
    assert_eq!(seen[1], json!({"type": "latch", "state": "pessimistic", "reason": "refused"}));

    gate.send(&rendered("plan-3", "r-3", &sample_config().replace("30s", "31s")));
    let seen = gate.until("release");
    assert_eq!(kinds(&seen), ["verdict", "latch", "release"], "{seen:?}");
    assert_eq!(seen[2], json!({"type": "release", "plan": "plan-3", "render": "r-3"}));

    // A term that starts held and ends held says so once more, at its start.
    gate.send(&json!({"type": "lost_leadership"}));
    assert_eq!(gate.next(), held());
    gate.send(&json!({"type": "lost_leadership"}));
    assert_eq!(gate.next(), held());
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn without_the_flag_a_term_starts_optimistic_with_no_latch_line() {
    let mut gate = Serve::start(&[]);
    gate.send(&rendered("plan-1", "r-1", &sample_config()));
    let first = gate.next();
    assert_eq!((&first["type"], &first["ok"]), (&json!("verdict"), &json!(true)), "{first}");
    gate.send(&json!({"type": "lost_leadership"}));
    let (rest, status) = gate.finish();
    assert!(status.success());
    assert!(rest.is_empty(), "an optimistic latch stays silent across terms: {rest:?}");
}
