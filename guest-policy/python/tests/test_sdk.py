"""The Python SDK (rendergate_policy) on CPython: its helpers, and the
default decision over the cases the fixtures do not spell out (a report
with no applied plan, a revert to a plan). The fixtures run the same code
as a component (host/tests/policy_languages.rs)."""

import unittest

import rendergate_policy as rp


def pod(name, applied=None, running=None, baseline=None):
    return rp.PodState(name, applied, running, baseline)


def verdict(plan, outcome, pinned=False):
    return rp.TriggerVerdict(rp.Verdict(plan, f"r-{plan}", outcome, True, pinned, False, ""))


FLEET = rp.Fleet(
    [
        pod("ns/a", "p2", "p1", "p1"),  # took p2, did not load it
        pod("ns/b", "p2", "p2", "p1"),  # took p2 and loaded it
        pod("ns/c", "p1", "p1", "p1"),  # never took p2
        pod("ns/d", "p2", None, "p2"),  # baseline already p2
    ],
    ["p0", "p1"],
    ["p2"],
)


class Reading(unittest.TestCase):
    def test_a_trigger_is_either_a_verdict_or_a_report(self):
        refusal = verdict("p2", rp.Outcome.REFUSED)
        self.assertEqual(rp.verdict_of(refusal).plan, "p2")
        self.assertIsNone(rp.applied_of(refusal))
        report = rp.TriggerApplied(pod("ns/e", "p2"))
        self.assertEqual(rp.applied_of(report).pod, "ns/e")
        self.assertIsNone(rp.verdict_of(report))

    def test_holding_lists_the_pods_a_plan_was_applied_to_in_fleet_order(self):
        self.assertEqual([p.pod for p in rp.holding(FLEET, "p2")], ["ns/a", "ns/b", "ns/d"])
        self.assertEqual(rp.holding(FLEET, "p9"), [])

    def test_passed_and_refused_plans(self):
        self.assertTrue(rp.passed(FLEET, "p1"))
        self.assertFalse(rp.passed(FLEET, "p2"))
        self.assertTrue(rp.refused(FLEET, "p2"))
        self.assertFalse(rp.refused(FLEET, "p1"))
        self.assertFalse(rp.passed(FLEET, None) or rp.refused(FLEET, None))

    def test_newest_passed_is_the_last_one_or_none(self):
        self.assertEqual(rp.newest_passed(FLEET), "p1")
        self.assertIsNone(rp.newest_passed(rp.Fleet([], [], [])))


class Building(unittest.TestCase):
    def test_an_empty_decision_and_a_full_one(self):
        self.assertEqual(rp.decision(), rp.Decision([], [], []))
        made = rp.decision(promote=[rp.promote(FLEET.pods[0], "p1")], notes=("n",))
        self.assertEqual(made.promote, [rp.Promote("ns/a", "p1")])
        self.assertEqual(made.notes, ["n"])

    def test_a_revert_goes_to_the_baseline_unless_given_a_plan(self):
        a = FLEET.pods[0]
        self.assertEqual(rp.revert(a, "p2").target, rp.RevertToBaseline())
        self.assertEqual(rp.revert(a, "p2", to="p1"), rp.Revert("ns/a", "p2", rp.RevertToPlan("p1")))


class DefaultDecision(unittest.TestCase):
    def test_a_pass_promotes_holders_unless_already_their_baseline(self):
        made = rp.default_decision(verdict("p2", rp.Outcome.PASSED), FLEET)
        self.assertEqual(made.promote, [rp.Promote("ns/a", "p2"), rp.Promote("ns/b", "p2")])
        self.assertEqual(made.revert, [])

    def test_a_refusal_reverts_holders_that_did_not_load_it(self):
        made = rp.default_decision(verdict("p2", rp.Outcome.REFUSED), FLEET)
        self.assertEqual([r.pod for r in made.revert], ["ns/a", "ns/d"])
        self.assertTrue(all(r.target == rp.RevertToBaseline() for r in made.revert))
        self.assertEqual(made.promote, [])

    def test_could_not_run_decides_nothing(self):
        self.assertEqual(rp.default_decision(verdict("p2", rp.Outcome.UNAVAILABLE), FLEET), rp.decision())

    def test_a_report_without_an_applied_plan_decides_nothing(self):
        report = rp.TriggerApplied(pod("ns/e", None, "p1", "p1"))
        self.assertEqual(rp.default_decision(report, FLEET), rp.decision())

    def test_a_late_report_promotes_a_passed_plan_and_reverts_a_refused_one(self):
        made = rp.default_decision(rp.TriggerApplied(pod("ns/e", "p1", "p0", "p0")), FLEET)
        self.assertEqual(made, rp.decision(promote=[rp.Promote("ns/e", "p1")]))
        made = rp.default_decision(rp.TriggerApplied(pod("ns/e", "p2", "p1", "p1")), FLEET)
        self.assertEqual(made, rp.decision(revert=[rp.Revert("ns/e", "p2", rp.RevertToBaseline())]))


if __name__ == "__main__":
    unittest.main()
