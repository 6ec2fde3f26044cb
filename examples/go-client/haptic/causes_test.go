package haptic

import (
	"fmt"
	"testing"
	"time"
)

// A render's causation stays while the gate may judge it: among the last
// renders sent, awaiting its verdict, or held by a pod (by id, or as the
// latest render of a plan a report without a render id names); the rest
// are forgotten, so the memory follows what the gate keeps.
func TestCausationIsKeptWhileTheGateMayJudgeTheRender(t *testing.T) {
	cs := newCauses()
	awaiting := func(render string) bool { return render == "r-awaited" }
	cs.told("ns/a", holding{render: "r-held", plan: "plan-held"}, time.Now())
	cs.told("ns/b", holding{plan: "plan-only"}, time.Now())
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
	cs.told("ns/a", holding{render: "r-new", plan: "plan-new"}, time.Now())
	for i := 0; i < 2*causesKept; i++ {
		send(fmt.Sprintf("s-%d", i), "plan-s")
	}
	if _, kept := cs.of["r-held"]; kept {
		t.Errorf("r-held kept after its pod moved on")
	}
}

// A superseded render is held since a pod first reported it (by id, or as
// the latest render of the plan a report without a render id names); a
// pod reporting it again does not move that, one moving on lets it go.
func TestARenderIsHeldSinceAPodFirstReportedIt(t *testing.T) {
	cs := newCauses()
	none := func(string) bool { return false }
	t0 := time.Unix(1000, 0)
	heldSince := func(render string) (time.Time, bool) { since, ok := cs.held()[render]; return since, ok }
	for _, r := range [][2]string{{"r-1", "plan-a"}, {"r-2", "plan-a"}, {"r-3", "plan-b"}} {
		cs.sent(r[0], r[1], "", none)
	}
	if _, held := heldSince("r-1"); held {
		t.Errorf("r-1 held before any report")
	}
	cs.told("ns/a", holding{render: "r-1", plan: "plan-a"}, t0)
	cs.told("ns/a", holding{render: "r-1", plan: "plan-a"}, t0.Add(time.Minute))
	if since, held := heldSince("r-1"); !held || !since.Equal(t0) {
		t.Errorf("r-1: held %v since %v, want since %v", held, since, t0)
	}
	cs.told("ns/b", holding{plan: "plan-a"}, t0.Add(time.Second))
	if since, held := heldSince("r-2"); !held || !since.Equal(t0.Add(time.Second)) {
		t.Errorf("r-2, the latest of plan-a: held %v since %v", held, since)
	}
	if since, _ := heldSince("r-1"); !since.Equal(t0) {
		t.Errorf("r-1: the earliest report counts, got %v", since)
	}
	cs.told("ns/a", holding{render: "r-3", plan: "plan-b"}, t0.Add(2*time.Second))
	if _, held := heldSince("r-1"); held {
		t.Errorf("r-1 still held after its pod moved on")
	}
}

// The renders awaiting a verdict stay bounded under a stream of bursts:
// those the gate has dropped unjudged (beyond the last it keeps, no pod
// holding them) are forgotten; one a pod holds is kept.
func TestRendersTheGateDroppedAreNoLongerAwaited(t *testing.T) {
	c := New(Config{})
	c.causes.told("ns/a", holding{render: "r-held", plan: "plan-held"}, time.Now())
	for i := 0; i < 10*causesKept; i++ {
		render := fmt.Sprintf("r-%d", i)
		if i == 3 {
			render = "r-held"
		}
		c.waiting[render] = time.Now()
		c.causes.sent(render, "plan-"+render, "", func(r string) bool { _, w := c.waiting[r]; return w })
		c.forgetUnjudgeable()
	}
	if _, kept := c.waiting["r-held"]; !kept || len(c.waiting) != waitingKept+1 {
		t.Errorf("%d renders awaited (r-held among them: %v), want the last %d and r-held", len(c.waiting), kept, waitingKept)
	}
}
