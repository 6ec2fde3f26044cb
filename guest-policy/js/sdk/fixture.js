// Policy fixtures (docs/protocol.md §4) read into the shapes a JavaScript
// policy gets inside its component (sdk/policy.js), so a policy's `decide` can
// be unit-tested under Node against the same fixture files that
// `rendergate policy test` runs its component over. Node only: the component
// never imports this module.

/** @typedef {import("./policy.js").Trigger} Trigger */
/** @typedef {import("./policy.js").Fleet} Fleet */
/** @typedef {import("./policy.js").PodState} PodState */
/** @typedef {import("./policy.js").RevertTarget} RevertTarget */

/**
 * One case: what `decide` is given, and what it must promote and revert.
 * @typedef {object} FixtureCase
 * @property {string} name
 * @property {Trigger} trigger
 * @property {Fleet} fleet
 * @property {{promote: import("./policy.js").Promote[], revert: import("./policy.js").Revert[]}} expect
 */

/**
 * A fixture file's cases (the parsed JSON array), as a policy sees them. As
 * on the host, `name`, `trigger`, `fleet` and `expect` are required, and an
 * absent list or optional field inside them is empty or `null`.
 * @param {any[]} cases the parsed JSON array
 * @returns {FixtureCase[]}
 */
export function readCases(cases) {
  return cases.map((c, i) => {
    for (const field of ["name", "trigger", "fleet", "expect"]) {
      if (c[field] === undefined) throw new Error(`case ${i}: missing "${field}"`);
    }
    return {
      name: c.name,
      trigger: trigger(c.trigger),
      fleet: {
        pods: (c.fleet.pods ?? []).map(podState),
        passedPlans: c.fleet.passed_plans ?? [],
        refusedPlans: c.fleet.refused_plans ?? [],
      },
      expect: {
        promote: (c.expect.promote ?? []).map(promoteItem),
        revert: (c.expect.revert ?? []).map(revertItem),
      },
    };
  });
}

/**
 * A decision's promotions and reverts in a canonical order, one line each,
 * so that two of them compare as sets (as `policy test` compares them):
 * `assert.deepStrictEqual(itemsOf(decision), itemsOf(expect))`.
 * @param {{promote: import("./policy.js").Promote[], revert: import("./policy.js").Revert[]}} decision
 * @returns {string[]}
 */
export function itemsOf(decision) {
  const promote = decision.promote.map((p) => `promote ${p.pod} to ${p.plan}`);
  const revert = decision.revert.map((r) => {
    const to = r.target.tag === "baseline" ? "baseline" : `plan ${r.target.val}`;
    return `revert ${r.pod} from ${r.plan} to ${to}`;
  });
  return [...new Set([...promote, ...revert])].sort();
}

/**
 * @param {any} t
 * @returns {Trigger}
 */
function trigger(t) {
  const tags = Object.keys(t);
  if (tags.length !== 1) throw new Error(`a trigger is {"verdict":…} or {"applied":…}, not ${tags}`);
  if (t.verdict) {
    const v = t.verdict;
    return {
      tag: "verdict",
      val: {
        plan: v.plan,
        render: v.render,
        outcome: v.outcome,
        newest: v.newest ?? false,
        pinned: v.pinned ?? false,
        remembered: v.remembered ?? false,
        message: v.message ?? "",
      },
    };
  }
  if (t.applied) return { tag: "applied", val: podState(t.applied) };
  throw new Error(`unknown trigger ${tags[0]}`);
}

/**
 * @param {any} p
 * @returns {import("./policy.js").Promote}
 */
function promoteItem(p) {
  return { pod: p.pod, plan: p.plan };
}

/**
 * @param {any} r
 * @returns {import("./policy.js").Revert}
 */
function revertItem(r) {
  return { pod: r.pod, plan: r.plan, target: revertTarget(r.target) };
}

/**
 * @param {any} p
 * @returns {PodState}
 */
function podState(p) {
  return {
    pod: p.pod,
    appliedPlan: p.applied_plan ?? null,
    runningPlan: p.running_plan ?? null,
    baselinePlan: p.baseline_plan ?? null,
  };
}

/**
 * @param {any} t
 * @returns {RevertTarget}
 */
function revertTarget(t) {
  if (t === "baseline") return { tag: "baseline" };
  if (t && typeof t.plan === "string") return { tag: "plan", val: t.plan };
  throw new Error(`a revert target is "baseline" or {"plan": …}, not ${JSON.stringify(t)}`);
}
