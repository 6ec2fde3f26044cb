// `scoped-revert` in JavaScript: docs/behaviour.md's default policy as a
// component, built by build.sh. As the Rust guest calls policy-core's
// `decide`, this one calls the SDK's port of it (sdk/policy.js).
import { defaultDecision } from "./sdk/policy.js";

/** The policy's name in the gate's logs and metrics. */
export function name() {
  return "scoped-revert";
}

/**
 * @param {import("./sdk/policy.js").Trigger} trigger
 * @param {import("./sdk/policy.js").Fleet} fleet
 * @returns {import("./sdk/policy.js").Decision}
 */
export function decide(trigger, fleet) {
  return defaultDecision(trigger, fleet);
}
