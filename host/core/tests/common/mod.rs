//! What the core's property tests share: the inputs they draw (`Op`), drawn
//! from small pools so ids, contents and memory hits repeat, and the names
//! those pools stand for. Each test picks its own pools and mix.

use proptest::prelude::*;
use proptest::strategy::Union;

/// One input to the gate, in pool indices.
#[derive(Clone, Debug)]
pub enum Op {
    Rendered {
        plan: u8,
        id: u8,
        content: u8,
    },
    /// `pick` chooses among every render sent so far (any term).
    Applied {
        pod: u8,
        pick: usize,
        with_id: bool,
        running: Option<u8>,
        baseline: Option<u8>,
    },
    PodTerminated {
        pod: u8,
    },
    /// Bit `i` set: pod `i` is alive.
    PodsDiscovered {
        alive: u8,
    },
    LostLeadership,
    /// Finishes the check in flight (if any): HAProxy's fixed answer, or
    /// "could not run".
    Finish {
        unavailable: bool,
    },
    /// A late result for a check started in an earlier term.
    StaleResult {
        pick: usize,
    },
    /// The other haproxy binary judges from now on.
    SwitchJudge,
    Advance {
        ms: u64,
    },
    /// Moves the clock to exactly `poll_timeout()`.
    ToTimer,
}

/// How many plans, render ids, contents and pods the inputs name.
#[derive(Clone, Copy, Debug)]
pub struct Pools {
    pub plans: u8,
    pub ids: u8,
    pub contents: u8,
    pub pods: u8,
}

/// How often each input is drawn, where the tests differ.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    pub applied: u32,
    pub finish: u32,
    /// Chance that a finished check could not run.
    pub unavailable: f64,
    /// 0: the judge never changes.
    pub switch_judge: u32,
    /// Clock moves besides any amount up to 40 s: the edges of the tunables.
    pub advance_ms: [u64; 6],
}

pub fn op(pools: Pools, mix: Mix) -> BoxedStrategy<Op> {
    let Pools { plans, ids, contents, pods } = pools;
    let advance = mix.advance_ms.map(Just);
    let mut arms: Vec<(u32, BoxedStrategy<Op>)> = vec![
        (
            8,
            (0..plans, 0..ids, 0..contents)
                .prop_map(|(plan, id, content)| Op::Rendered { plan, id, content })
                .boxed(),
        ),
        (
            mix.applied,
            (
                0..pods,
                any::<usize>(),
                prop::bool::weighted(0.8),
                prop::option::of(0..plans),
                prop::option::of(0..plans),
            )
                .prop_map(|(pod, pick, with_id, running, baseline)| Op::Applied {
                    pod,
                    pick,
                    with_id,
                    running,
                    baseline,
                })
                .boxed(),
        ),
        (1, (0..pods).prop_map(|pod| Op::PodTerminated { pod }).boxed()),
        (1, (0..(1u8 << pods)).prop_map(|alive| Op::PodsDiscovered { alive }).boxed()),
        (1, Just(Op::LostLeadership).boxed()),
        (
            mix.finish,
            prop::bool::weighted(mix.unavailable)
                .prop_map(|unavailable| Op::Finish { unavailable })
                .boxed(),
        ),
        (1, any::<usize>().prop_map(|pick| Op::StaleResult { pick }).boxed()),
        (
            2,
            prop_oneof![
                advance[0],
                advance[1],
                advance[2],
                advance[3],
                advance[4],
                advance[5],
                0..40_000u64
            ]
            .prop_map(|ms| Op::Advance { ms })
            .boxed(),
        ),
        (3, Just(Op::ToTimer).boxed()),
    ];
    if mix.switch_judge > 0 {
        arms.push((mix.switch_judge, Just(Op::SwitchJudge).boxed()));
    }
    Union::new_weighted(arms).boxed()
}

pub fn plan_name(plan: u8) -> String {
    format!("plan-{plan}")
}

pub fn id_name(id: u8) -> String {
    format!("r-{id}")
}

pub fn pod_name(pod: u8) -> String {
    format!("ns/p{pod}")
}

pub fn config_text(content: u8) -> String {
    format!("global\n# content {content}\n")
}
