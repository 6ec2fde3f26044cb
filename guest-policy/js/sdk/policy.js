// Writing a rendergate policy in JavaScript: the shapes of the
// `rendergate:policy@0.1.0` world (wit/policy.wit) as componentize-qjs hands
// them to a policy, helpers over them, and the default decision ported from
// policy-core (guest-policy/core/src/lib.rs), so a JavaScript policy reads
// like a Rust one. Plain ES module: it runs the same under Node (unit tests)
// and inside the component. docs/policies.md, "Writing a policy in JavaScript".
//
// WIT to JavaScript, as componentize-qjs maps it: record fields are
// camelCase (`applied-plan` is `appliedPlan`), an absent `option<string>` is
// `null`, a variant is `{tag, val}` (`{tag: "baseline"}` has no `val`), an
// enum is its case name (`"passed"`).

/**
 * One HAProxy pod as the gate knows it.
 * @typedef {object} PodState
 * @property {string} pod "namespace/name".
 * @property {string | null} appliedPlan The plan the pod was last given.
 * @property {string | null} runningPlan The plan the pod's own HAProxy last loaded.
 * @property {string | null} baselinePlan The plan the pod falls back to on a revert.
 */

/**
 * What HAProxy said about a render: `"unavailable"` means the check could not
 * run and HAProxy judged nothing.
 * @typedef {"passed" | "refused" | "unavailable"} Outcome
 */

/**
 * A published verdict, as the policy sees it.
 * @typedef {object} Verdict
 * @property {string} plan
 * @property {string} render
 * @property {Outcome} outcome
 * @property {boolean} newest
 * @property {boolean} pinned
 * @property {boolean} remembered
 * @property {string} message
 */

/**
 * What the policy is asked about: a verdict, or a pod's new report.
 * @typedef {{tag: "verdict", val: Verdict} | {tag: "applied", val: PodState}} Trigger
 */

/**
 * The fleet at the moment of the trigger.
 * @typedef {object} Fleet
 * @property {PodState[]} pods Every pod, sorted by pod name.
 * @property {string[]} passedPlans Plans HAProxy accepted, oldest first (bounded).
 * @property {string[]} refusedPlans Plans HAProxy refused, oldest first (bounded).
 */

/**
 * Where a revert takes a pod: its baseline, or a passed plan.
 * @typedef {{tag: "baseline"} | {tag: "plan", val: string}} RevertTarget
 */

/**
 * @typedef {object} Promote
 * @property {string} pod
 * @property {string} plan
 */

/**
 * @typedef {object} Revert
 * @property {string} pod
 * @property {string} plan The plan being reverted away from.
 * @property {RevertTarget} target
 */

/**
 * What a policy decided for one trigger. `notes` are free-form remarks for
 * the gate's log, never compared by fixtures; they are also a JavaScript
 * policy's way to log, as the component has no `console`.
 * @typedef {object} Decision
 * @property {Promote[]} promote
 * @property {Revert[]} revert
 * @property {string[]} notes
 */

/**
 * The revert target `baseline`.
 * @type {RevertTarget}
 */
export const BASELINE = Object.freeze({ tag: "baseline" });

/**
 * The revert target "this passed plan".
 * @param {string} plan
 * @returns {RevertTarget}
 */
export function planTarget(plan) {
  return { tag: "plan", val: plan };
}

/**
 * A decision that does nothing; add to it with the helpers below.
 * @returns {Decision}
 */
export function emptyDecision() {
  return { promote: [], revert: [], notes: [] };
}

/**
 * The trigger's verdict, or `null` when the trigger is a pod's report.
 * @param {Trigger} trigger
 * @returns {Verdict | null}
 */
export function verdictOf(trigger) {
  return trigger.tag === "verdict" ? trigger.val : null;
}

/**
 * The reporting pod, or `null` when the trigger is a verdict.
 * @param {Trigger} trigger
 * @returns {PodState | null}
 */
export function appliedOf(trigger) {
  return trigger.tag === "applied" ? trigger.val : null;
}

/**
 * Whether the pod was last given `plan`.
 * @param {PodState} pod
 * @param {string} plan
 */
export function holds(pod, plan) {
  return pod.appliedPlan === plan;
}

/**
 * Whether the pod's own HAProxy loaded `plan`.
 * @param {PodState} pod
 * @param {string} plan
 */
export function runs(pod, plan) {
  return pod.runningPlan === plan;
}

/**
 * The pods that were last given `plan`, in the fleet's order.
 * @param {Fleet} fleet
 * @param {string} plan
 * @returns {PodState[]}
 */
export function podsHolding(fleet, plan) {
  return fleet.pods.filter((pod) => holds(pod, plan));
}

/**
 * Whether HAProxy passed `plan` (among the fleet's bounded memory of passes).
 * @param {Fleet} fleet
 * @param {string} plan
 */
export function isPassed(fleet, plan) {
  return fleet.passedPlans.includes(plan);
}

/**
 * Whether HAProxy refused `plan`.
 * @param {Fleet} fleet
 * @param {string} plan
 */
export function isRefused(fleet, plan) {
  return fleet.refusedPlans.includes(plan);
}

/**
 * The newest passed plan, or `null` when none passed.
 * @param {Fleet} fleet
 * @returns {string | null}
 */
export function newestPassed(fleet) {
  return fleet.passedPlans.length ? fleet.passedPlans[fleet.passedPlans.length - 1] : null;
}

/**
 * Adds "promote this pod's baseline to `plan`".
 * @param {Decision} decision
 * @param {PodState} pod
 * @param {string} plan
 */
export function promote(decision, pod, plan) {
  decision.promote.push({ pod: pod.pod, plan });
}

/**
 * Adds "revert this pod away from `plan`", to its baseline unless a target is given.
 * @param {Decision} decision
 * @param {PodState} pod
 * @param {string} plan
 * @param {RevertTarget} [target]
 */
export function revert(decision, pod, plan, target = BASELINE) {
  decision.revert.push({ pod: pod.pod, plan, target });
}

/**
 * Adds a remark for the gate's log.
 * @param {Decision} decision
 * @param {string} text
 */
export function note(decision, text) {
  decision.notes.push(String(text));
}

/**
 * The default decision, policy-core's `decide` (docs/behaviour.md, "The
 * promotion and revert policy"):
 *
 * - a pass for plan P: every pod that applied P and whose baseline is not P
 *   may promote its baseline to P;
 * - a refusal of P: every pod that applied P but whose own HAProxy does not
 *   run P is reverted to its baseline; a pod that loaded P is left alone,
 *   its reload being stronger evidence than `haproxy -c`;
 * - could not run: nothing;
 * - a pod reporting P applied after P passed may promote then; a pod
 *   reporting a refused P it does not run is reverted then.
 *
 * A component sees each pod's plans, not the render it holds (the world
 * carries no render ids), so every pod is matched by plan: on a pass it
 * promotes every pod holding P, where the built-in default, which knows
 * each pod's render, promotes only the pods holding the content that
 * passed. The host's rules keep every promotion to content that passed.
 * @param {Trigger} trigger
 * @param {Fleet} fleet
 * @returns {Decision}
 */
export function defaultDecision(trigger, fleet) {
  const decision = emptyDecision();
  if (trigger.tag === "verdict") {
    const verdict = trigger.val;
    if (verdict.outcome === "passed") {
      for (const pod of podsHolding(fleet, verdict.plan)) {
        promoteUnlessBaseline(decision, pod, verdict.plan);
      }
    } else if (verdict.outcome === "refused") {
      for (const pod of podsHolding(fleet, verdict.plan)) {
        revertUnlessRunning(decision, pod, verdict.plan);
      }
    }
    return decision;
  }
  const pod = trigger.val;
  const plan = pod.appliedPlan;
  if (plan !== null) {
    if (isPassed(fleet, plan)) promoteUnlessBaseline(decision, pod, plan);
    else if (isRefused(fleet, plan)) revertUnlessRunning(decision, pod, plan);
  }
  return decision;
}

/**
 * policy-core's `push_promote`: a baseline already on the plan needs nothing.
 * @param {Decision} decision
 * @param {PodState} pod
 * @param {string} plan
 */
function promoteUnlessBaseline(decision, pod, plan) {
  if (pod.baselinePlan !== plan) promote(decision, pod, plan);
}

/**
 * policy-core's `push_revert`: a pod whose own HAProxy loaded the plan stays.
 * @param {Decision} decision
 * @param {PodState} pod
 * @param {string} plan
 */
function revertUnlessRunning(decision, pod, plan) {
  if (!runs(pod, plan)) revert(decision, pod, plan);
}
