//! Embedding the gate in a Rust controller: construct it with a config, a
//! checker and a policy; send it events; act on its outputs.
//!
//! Run with `cargo run --example embed` (needs `haproxy` on PATH).

use rendergate::{
    Event, FileKind, Gate, GateConfig, HaproxyChecker, HaproxyOptions, LatchState, Output,
    PodReport, PolicySeat, Render, RenderFile,
};
use std::sync::Arc;
use std::time::Duration;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/render");
    let config = std::fs::read_to_string(format!("{dir}/haproxy.cfg")).expect("the sample render");
    let hosts = std::fs::read_to_string(format!("{dir}/maps/hosts.map")).expect("the sample map");
    let files = vec![RenderFile {
        kind: FileKind::Map,
        path: "maps/hosts.map".into(),
        content: hosts.into(),
    }];

    let checker = Arc::new(HaproxyChecker::new(HaproxyOptions::default()));
    let config_of_gate = GateConfig { check_interval: Duration::ZERO, ..GateConfig::default() };
    let (gate, mut outputs) = Gate::start(config_of_gate, checker, PolicySeat::default());

    // The controller's side: act on outputs as they come. Read them in their
    // own task so the gate never waits on a full channel.
    let controller = tokio::spawn(async move {
        while let Some(output) = outputs.recv().await {
            match output {
                Output::Verdict(v) => {
                    println!("verdict {} {}: {}", v.plan, v.render, v.outcome.label())
                }
                Output::Latch(LatchState::Pessimistic(why)) => {
                    println!("hold every render ({})", why.as_str())
                }
                Output::Latch(LatchState::Optimistic) => println!("dispatch renders at once again"),
                Output::Release { plan, render } => {
                    println!("dispatch held render {render} of {plan}")
                }
                Output::Promote { promote: p, render } => {
                    println!("promote {} to {} (render {render:?})", p.pod, p.plan)
                }
                Output::Revert(r) => println!("revert {} from {}", r.pod, r.plan),
                // Only with GateConfig::shadow, which this controller does not set.
                Output::Shadow(_) => {}
            }
        }
    });

    let broken =
        config.replace("    bind :8080\n", "    bind :8080\n    http-request bogus-action\n");
    let events = [
        Event::Rendered(Render::new("plan-1", "r-1", config.clone(), files.clone())),
        Event::Applied(PodReport {
            pod: "haptic/haproxy-0".into(),
            render: Some("r-2".into()),
            plan: "plan-2".into(),
            running_plan: Some("plan-1".into()),
            baseline_plan: Some("plan-1".into()),
        }),
        Event::Rendered(Render::new("plan-2", "r-2", broken, files.clone())),
        Event::Rendered(Render::new("plan-3", "r-3", config, files)),
    ];
    for event in events {
        gate.send(event).await.expect("the gate runs");
    }
    let metrics = gate.metrics().clone();
    // End of input: judge what is queued, then stop.
    gate.finish().await;
    controller.await.expect("the controller loop");
    print!(
        "{}",
        metrics
            .render()
            .lines()
            .filter(|l| l.starts_with("rendergate_checks_total"))
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
}
