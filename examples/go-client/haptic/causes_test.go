package haptic

import (
	"fmt"
	"testing"
)

// A render's causation stays while the gate may judge it: among the last
// renders sent, awaiting its verdict, or held by a pod (by id, or as the
// latest render of a plan a report without a render id names); the rest
// are forgotten, so the memory follows what the gate keeps.
func TestCausationIsKeptWhileTheGateMayJudgeTheRender(t *testing.T) {
	cs := newCauses()
	awaiting := func(render string) bool { return render == "r-awaited" }
	cs.told("ns/a", holding{render: "r-held", plan: "plan-held"})
	cs.told("ns/b", holding{plan: "plan-only"})
	send := func(render, plan string) { cs.sent(render, plan, "cause-"+render, awaiting) }
	send("r-held", "plan-held")
	send("r-awaited", "plan-awaited")
	send("r-plan-only-old", "plan-only")
	send("r-plan-only", "plan-only")
	send("r-old", "plan-old")
	for i := 0; i < 10*causesKept; i++ {
		send(fmt.Sprintf("r-%d", i), fmt.Sprintf("plan-%d", i))
	}
	for render, kept := range map[string]bool{
		"r-held": true, "r-awaited": true, "r-plan-only": true, "r-plan-only-old": false, "r-old": false,
		fmt.Sprintf("r-%d", 10*causesKept-1): true, fmt.Sprintf("r-%d", 10*causesKept-causesKept): true,
		"r-0": false,
	} {
		if got := cs.of[render]; (got == "cause-"+render) != kept {
			t.Errorf("%s: causation %q, kept: want %v", render, got, kept)
		}
	}
	if n := len(cs.order); n > 2*causesKept+3 {
		t.Errorf("%d renders remembered", n)
	}
	// a pod that moves on lets its old render go
	cs.told("ns/a", holding{render: "r-new", plan: "plan-new"})
	for i := 0; i < 2*causesKept; i++ {
		send(fmt.Sprintf("s-%d", i), "plan-s")
	}
	if _, kept := cs.of["r-held"]; kept {
		t.Errorf("r-held kept after its pod moved on")
	}
}
