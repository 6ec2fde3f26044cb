"""Writing a rendergate policy component in Python (docs/policies.md).

The Python counterpart of the Rust guests' `policy-core` and `policy-guest`:
the `rendergate:policy` world's types (wit/policy.wit), helpers to read a
trigger and a fleet and to build a decision, and the default decision
(`default_decision`, policy-core's `decide`) for a policy to call or to
narrow.

The types are the bindings componentize-py generates from wit/policy.wit
when it builds a component (`wit_world`, never committed): a policy works on
what the host hands it, with no copy into types of its own. A policy module
exports them through a class named `WitWorld`:

    import wit_world
    from rendergate_policy import Decision, Fleet, Trigger, default_decision

    class WitWorld(wit_world.WitWorld):
        def name(self) -> str:
            return "my-policy"

        def decide(self, trigger: Trigger, fleet: Fleet) -> Decision:
            return default_decision(trigger, fleet)
"""

from typing import Iterable, List, Optional

from wit_world.imports import types

# The world's types, under the names of wit/policy.wit.
PodState = types.PodState
Outcome = types.Outcome
Verdict = types.Verdict
Fleet = types.Fleet
Promote = types.Promote
Revert = types.Revert
Decision = types.Decision
# A trigger is one of two cases: a verdict, or a pod's new report.
Trigger = types.Trigger
TriggerVerdict = types.Trigger_Verdict
TriggerApplied = types.Trigger_Applied
# Where a revert takes a pod: its baseline, or a passed plan.
RevertTarget = types.RevertTarget
RevertToBaseline = types.RevertTarget_Baseline
RevertToPlan = types.RevertTarget_Plan

# The default policy's name, as `name()` reports it (policy-core's DEFAULT_NAME).
DEFAULT_NAME = "default"


def verdict_of(trigger: Trigger) -> Optional[Verdict]:
    """The verdict, when the trigger is one; None for a pod's report."""
    return trigger.value if isinstance(trigger, TriggerVerdict) else None


def applied_of(trigger: Trigger) -> Optional[PodState]:
    """The reporting pod's state, when the trigger is a report; None for a verdict."""
    return trigger.value if isinstance(trigger, TriggerApplied) else None


def holding(fleet: Fleet, plan: str) -> List[PodState]:
    """The pods holding `plan`: those it was last applied to, in fleet order."""
    return [pod for pod in fleet.pods if pod.applied_plan == plan]


def passed(fleet: Fleet, plan: Optional[str]) -> bool:
    """Whether HAProxy passed `plan` (among the fleet's bounded passed plans)."""
    return plan is not None and plan in fleet.passed_plans


def refused(fleet: Fleet, plan: Optional[str]) -> bool:
    """Whether HAProxy refused `plan` (among the fleet's bounded refused plans)."""
    return plan is not None and plan in fleet.refused_plans


def newest_passed(fleet: Fleet) -> Optional[str]:
    """The newest plan HAProxy passed, or None when none is known."""
    return fleet.passed_plans[-1] if fleet.passed_plans else None


def decision(
    promote: Iterable[Promote] = (),
    revert: Iterable[Revert] = (),
    notes: Iterable[str] = (),
) -> Decision:
    """A decision; with no arguments, the empty one (no promotion, no revert)."""
    return Decision(list(promote), list(revert), list(notes))


def promote(pod: PodState, plan: str) -> Promote:
    """Lets `pod` promote its baseline to `plan`."""
    return Promote(pod.pod, plan)


def revert(pod: PodState, plan: str, to: Optional[str] = None) -> Revert:
    """Reverts `pod` away from `plan`: to its baseline, or to the passed plan `to`."""
    target = RevertToBaseline() if to is None else RevertToPlan(to)
    return Revert(pod.pod, plan, target)


def default_decision(trigger: Trigger, fleet: Fleet) -> Decision:
    """The default decision (docs/behaviour.md, "The promotion and revert policy"),
    as policy-core's `decide` makes it:

    - a pass for plan P: every pod that applied P and whose baseline is not P
      may promote its baseline to P;
    - a refusal of P: every pod that applied P but whose own HAProxy does not
      run P is reverted to its baseline; a pod that loaded P is left alone,
      its reload being stronger evidence than `haproxy -c`;
    - could not run: nothing;
    - a pod reporting P applied after P passed may promote then; a pod
      reporting a refused P it does not run is reverted then.

    A component sees each pod's plans, not the render it holds (the world
    carries no render ids), so every pod is matched by plan: on a pass it
    promotes every pod holding P, where the built-in default, which knows
    each pod's render, promotes only the pods holding the content that
    passed. The host's rules keep every promotion to content that passed.
    """
    made = decision()
    verdict = verdict_of(trigger)
    if verdict is not None:
        if verdict.outcome == Outcome.PASSED:
            for pod in holding(fleet, verdict.plan):
                _push_promote(made, pod, verdict.plan)
        elif verdict.outcome == Outcome.REFUSED:
            for pod in holding(fleet, verdict.plan):
                _push_revert(made, pod, verdict.plan)
        return made
    pod = applied_of(trigger)
    plan = pod.applied_plan
    if passed(fleet, plan):
        _push_promote(made, pod, plan)
    elif refused(fleet, plan):
        _push_revert(made, pod, plan)
    return made


def _push_promote(made: Decision, pod: PodState, plan: str) -> None:
    if pod.baseline_plan != plan:
        made.promote.append(promote(pod, plan))


def _push_revert(made: Decision, pod: PodState, plan: str) -> None:
    if pod.running_plan == plan:
        return  # its own HAProxy loaded the plan: stronger evidence than `-c`
    made.revert.append(revert(pod, plan))
