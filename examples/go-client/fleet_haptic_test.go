// The real fleet through the HAPTIC adapter (issue 24, item 6): the three
// HAProxy pods under traffic of fleet_test.go, with a controller that
// talks to the gate only through package haptic on an in-memory bus, as a
// HAPTIC controller would; serve is killed inside plan-2's window. plan-2
// is still refused and reverted on every pod, plan-3 is held until it
// passes, and no request through any pod fails.

package rendergate_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	rendergate "rendergate.example/client"
	"rendergate.example/client/haptic"
	"rendergate.example/client/internal/testgate"
)

// fleetBus is the controller's bus: the component's Events, and what it
// publishes, in order.
type fleetBus struct {
	in  chan any
	out chan any
}

func (b *fleetBus) Events(ctx context.Context) <-chan any { return testgate.Events(ctx, b.in) }

func (b *fleetBus) Publish(ev any) { b.out <- ev }

// hapticController dispatches renders unless the latch holds them, has the
// pods act on every PromoteBaseline and RevertPod, and reports what each
// pod then holds, all through the bus.
type hapticController struct {
	t        *testing.T
	bus      *fleetBus
	pods     map[string]*rendergate.FleetPod
	reports  chan rendergate.Applied
	pending  int
	held     bool
	waiting  *rendergate.Rendered
	verdicts map[string]haptic.RenderGateCompleted
	latches  []haptic.LatchChanged
	promotes []string
	reverts  []string
}

func podRef(name string) (string, string) {
	ns, pod, _ := strings.Cut(name, "/")
	return ns, pod
}

func (c *hapticController) report(a rendergate.Applied) {
	ns, name := podRef(a.Pod)
	c.bus.in <- haptic.ConfigAppliedToPod{Namespace: ns, Name: name, PlanID: a.Plan, RenderID: a.Render,
		RunningPlanID: a.RunningPlan, BaselinePlanID: a.BaselinePlan}
}

func (c *hapticController) act(p *rendergate.FleetPod, action func() (rendergate.Applied, bool, error)) {
	c.pending++
	go func() {
		a, _, err := action()
		if err != nil {
			c.t.Error(err)
		}
		a.Pod = p.Name()
		c.reports <- a
	}()
}

func (c *hapticController) render(r rendergate.Rendered) {
	files := make([]haptic.File, 0, len(r.Files))
	for _, f := range r.Files {
		files = append(files, haptic.File{Kind: f.Kind, Path: f.Path, Content: []byte(f.Content)})
	}
	c.bus.in <- haptic.TemplateRendered{PlanID: r.Plan, RenderID: r.Render, Config: r.Config, Files: files}
	if c.held {
		c.waiting = &r
		return
	}
	c.dispatch(r)
}

func (c *hapticController) dispatch(r rendergate.Rendered) {
	for _, p := range c.pods {
		p := p
		c.act(p, func() (rendergate.Applied, bool, error) { return p.Apply(r) })
	}
}

func (c *hapticController) handle(ev any) {
	switch e := ev.(type) {
	case haptic.RenderGateCompleted:
		c.verdicts[e.RenderID] = e
	case haptic.LatchChanged:
		c.latches = append(c.latches, e)
		c.held = e.Pessimistic
	case haptic.RenderReleased:
		if c.waiting != nil && c.waiting.Render == e.RenderID {
			r := *c.waiting
			c.waiting = nil
			c.dispatch(r)
		}
	case haptic.PromoteBaseline:
		c.promotes = append(c.promotes, e.Name+" "+e.PlanID)
		p := c.pods[e.Namespace+"/"+e.Name]
		c.act(p, func() (rendergate.Applied, bool, error) { return p.Promote(e.PlanID) })
	case haptic.RevertPod:
		c.reverts = append(c.reverts, e.Name+" "+e.PlanID+" to "+e.To)
		p := c.pods[e.Namespace+"/"+e.Name]
		c.act(p, func() (rendergate.Applied, bool, error) { return p.Revert(e.PlanID, e.To) })
	}
}

func (c *hapticController) until(what string, done func() bool) {
	c.t.Helper()
	deadline := time.After(90 * time.Second)
	for !done() {
		select {
		case a := <-c.reports:
			c.pending--
			c.report(a)
		case ev := <-c.bus.out:
			c.handle(ev)
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			c.t.Fatalf("timed out waiting for %s; latches %+v, promotes %v, reverts %v, %d pod actions pending",
				what, c.latches, c.promotes, c.reverts, c.pending)
		}
	}
}

func (c *hapticController) onBaseline(plan string) bool {
	for _, p := range c.pods {
		if p.Report().BaselinePlan != plan {
			return false
		}
	}
	return true
}

func (c *hapticController) untilServed(l *rendergate.FleetLoad, plan string, n int) {
	c.t.Helper()
	base := map[string]int{}
	for name := range c.pods {
		base[name] = l.Count(name, plan)
	}
	c.until(fmt.Sprintf("%d requests served by %s through every pod", n, plan), func() bool {
		for name := range c.pods {
			if l.Count(name, plan)-base[name] < n {
				return false
			}
		}
		return true
	})
}

// (A short name: the pods' master sockets live under t.TempDir, which holds it.)
func TestHAPTICFleet(t *testing.T) {
	hap := rendergate.FleetHAProxy(t)
	bin := rendergate.Binary(t)
	backends := rendergate.FleetBackends(t, 20)
	server := rendergate.StartBackend(t)
	r0 := rendergate.FleetRender("plan-0", "r-0", backends, server, false)
	r1 := rendergate.FleetRender("plan-1", "r-1", backends, server, false)
	r2 := rendergate.FleetRender("plan-2", "r-2", backends, server, true)
	r3 := rendergate.FleetRender("plan-3", "r-3", backends, server, false)
	dir := t.TempDir()
	c := &hapticController{t: t, bus: &fleetBus{in: make(chan any, 4096), out: make(chan any, 4096)},
		pods: map[string]*rendergate.FleetPod{}, reports: make(chan rendergate.Applied, 64),
		verdicts: map[string]haptic.RenderGateCompleted{}}
	var pods []*rendergate.FleetPod
	var refs []haptic.PodRef
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("fleet/haproxy-%d", i)
		p := rendergate.StartFleetPod(t, hap, filepath.Join(dir, fmt.Sprintf("pod-%d", i)), name, r0)
		pods = append(pods, p)
		c.pods[name] = p
		ns, pod := podRef(name)
		refs = append(refs, haptic.PodRef{Namespace: ns, Name: pod})
	}
	traffic := rendergate.StartLoad(t, pods, backends)

	gate := haptic.New(haptic.Config{Bus: c.bus, CheckTimeout: 30 * time.Second,
		Serve: rendergate.Options{Binary: bin, Args: []string{"--haproxy", hap, "--check-interval", "0s"},
			RestartDelay: 50 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- gate.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-started; err != nil {
			t.Errorf("Start: %v", err)
		}
	}()
	c.bus.in <- haptic.HAProxyPodsDiscovered{Pods: refs}
	for _, p := range pods {
		a := p.Report()
		a.Pod = p.Name()
		c.report(a)
	}
	c.untilServed(traffic, "plan-0", 10)

	// plan-1: passed, dispatched at once, promoted on every pod
	c.render(r1)
	c.until("plan-1 promoted on every pod", func() bool { return c.pending == 0 && c.onBaseline("plan-1") })
	c.untilServed(traffic, "plan-1", 10)

	// plan-2: dispatched at once; serve is killed while it is judged
	c.render(r2)
	for deadline := time.Now().Add(10 * time.Second); gate.Pid() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no serve to kill")
		}
		time.Sleep(time.Millisecond)
	}
	if err := syscall.Kill(gate.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.until("plan-2 refused and reverted on every pod", func() bool {
		v, judged := c.verdicts["r-2"]
		return judged && v.Refused && c.pending == 0 && len(c.reverts) >= len(pods) &&
			c.onBaseline("plan-1") && allOn(pods, "plan-1")
	})
	restarted := false
	for _, l := range c.latches {
		restarted = restarted || (l.Pessimistic && l.Reason == "restarted")
	}
	if !restarted {
		t.Errorf("no restarted latch: %+v", c.latches)
	}
	want1 := rendergate.RenderFiles(r1)
	for _, p := range pods {
		live, err := p.LiveFiles()
		if err != nil {
			t.Fatal(err)
		}
		if d := rendergate.SameTree(live, want1); d != "" {
			t.Fatalf("%s after the revert: %s", p.Name(), d)
		}
	}
	c.untilServed(traffic, "plan-1", 10)

	// plan-3: held by the refusal's latch until it passes, then dispatched and promoted
	c.render(r3)
	if !c.held || c.waiting == nil {
		t.Fatalf("plan-3 was not held: latches %+v", c.latches)
	}
	c.until("plan-3 released and promoted on every pod", func() bool { return c.pending == 0 && c.onBaseline("plan-3") })
	c.untilServed(traffic, "plan-3", 10)

	traffic.Halt()
	total, failures, plans := traffic.Summary()
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... %d more", len(failures)-20))
		}
		t.Fatalf("%d of %d requests failed:\n%s", len(failures), total, strings.Join(failures, "\n"))
	}
	if plans["plan-2"] != 0 || plans["plan-3"] == 0 {
		t.Fatalf("requests served by plan: %v (plan-2 must never serve)", plans)
	}
}

// allOn says every pod holds and runs plan.
func allOn(pods []*rendergate.FleetPod, plan string) bool {
	for _, p := range pods {
		if a := p.Report(); a.Plan != plan || a.RunningPlan != plan {
			return false
		}
	}
	return true
}
