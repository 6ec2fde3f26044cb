"""`scoped-revert`: docs/behaviour.md's default policy as a Python component,
the counterpart of guest-policy/scoped-revert (Rust). The logic is the SDK's
`default_decision`, a port of policy-core's `decide`; both pass
tests/fixtures/policies/scoped-revert.json.
"""

import wit_world
from rendergate_policy import Decision, Fleet, Trigger, default_decision


class WitWorld(wit_world.WitWorld):
    def name(self) -> str:
        return "scoped-revert"

    def decide(self, trigger: Trigger, fleet: Fleet) -> Decision:
        return default_decision(trigger, fleet)
