// The JavaScript scoped-revert's decision, run under Node over the shipped
// fixtures (tests/fixtures/policies/scoped-revert.json): the SDK's port of
// policy-core's `decide` must agree with every case, before any component is
// built. The component itself runs the same fixtures through
// `rendergate policy test` (guest-policy/build-guests.sh, cargo test).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { decide, name } from "../scoped-revert.js";
import { itemsOf, readCases } from "../sdk/fixture.js";

const fixtures = new URL("../../../tests/fixtures/policies/scoped-revert.json", import.meta.url);
const cases = readCases(JSON.parse(readFileSync(fixtures, "utf8")));

test("the fixture file has cases", () => {
  assert.ok(cases.length >= 11, `${cases.length} cases`);
});

test("the policy's name", () => {
  assert.equal(name(), "scoped-revert");
});

for (const c of cases) {
  test(c.name, () => {
    const decision = decide(c.trigger, c.fleet);
    assert.deepEqual(itemsOf(decision), itemsOf(c.expect));
    assert.ok(Array.isArray(decision.notes), "a decision always has notes (the WIT record needs them)");
  });
}
