//! The sample render (examples/render) as `serve` input, for the tests that
//! drive the binary with policies: a `rendered` event of it, whole or with a
//! line HAProxy refuses, and the haproxy to check it with.

use serde_json::{Value, json};
use std::path::Path;

/// `RENDERGATE_TEST_HAPROXY`, or `haproxy` on `PATH`.
pub fn haproxy() -> String {
    std::env::var("RENDERGATE_TEST_HAPROXY").unwrap_or_else(|_| "haproxy".into())
}

fn example(path: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/render").join(path),
    )
    .unwrap()
}

/// `plan`'s `rendered` event (render `r-PLAN`): the sample, or with
/// `broken` a frontend line HAProxy refuses.
pub fn rendered(plan: &str, broken: bool) -> Value {
    let mut config = example("haproxy.cfg");
    if broken {
        config =
            config.replace("    bind :8080\n", "    bind :8080\n    http-request bogus-action\n");
    }
    let files =
        json!([{"kind": "map", "path": "maps/hosts.map", "content": example("maps/hosts.map")}]);
    json!({"type": "rendered", "plan": plan, "render": format!("r-{plan}"), "config": config, "files": files})
}
