// A real fleet under traffic (issue 16, item 4): three HAProxy pods on
// loopback (fleet_pod_test.go) behind a load loop (fleet_traffic_test.go),
// driven by a controller built on this package through one episode:
//
//  1. plan-1 is held by the term-start latch (serve --start-held), passes,
//     is released, dispatched, loaded by every pod and promoted;
//  2. plan-2, which HAProxy refuses, is dispatched at once (the latch is
//     open): each pod writes it, its HAProxy refuses the reload and keeps
//     running plan-1, the pod reports plan-2 applied but not running, the
//     gate refuses plan-2 and the pods put their baseline back on the
//     gate's revert lines;
//  3. plan-3 is held by the refusal's latch until the gate passes it, then
//     released, dispatched and promoted.
//
// No request through any pod may fail at any time. TestFleetUnderTraffic
// runs it small; BenchmarkExposure runs it at 1,000 backends and measures
// the exposure window (plan-2's rendered event to the last revert line)
// against bare `haproxy -c` on the same render, in the same run.

package rendergate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const fleetPods = 3

// fleetHAProxy is the pods' haproxy ($RENDERGATE_TEST_HAPROXY, else haproxy
// on PATH, else /usr/sbin/haproxy): missing, the fleet fails in CI and
// skips elsewhere.
func fleetHAProxy(t testing.TB) string {
	t.Helper()
	path, err := exec.LookPath(haproxy())
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the fleet test needs haproxy (set RENDERGATE_TEST_HAPROXY): %v", err)
		}
		t.Skipf("no haproxy (set RENDERGATE_TEST_HAPROXY): %v", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// fleetBackends is $RENDERGATE_FLEET_BACKENDS, else def.
func fleetBackends(t testing.TB, def int) int {
	s := os.Getenv("RENDERGATE_FLEET_BACKENDS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("RENDERGATE_FLEET_BACKENDS=%q: want a positive number", s)
	}
	return n
}

// scoped runs its cleanups when one episode ends, so that a benchmark's
// episodes do not pile up pods until the whole benchmark ends.
type scoped struct {
	testing.TB
	cleanups []func()
}

func (s *scoped) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }

func (s *scoped) close() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// lockedWriter lets the test read serve's log while serve writes it.
type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// episode is what one run measured.
type episode struct {
	bad Rendered // plan-2, for the bare check
	// window: from just before plan-2's rendered event was sent to the
	// arrival of the last revert line.
	window time.Duration
	// verdict: to the arrival of plan-2's verdict; applied: to the send of
	// the last pod's report of plan-2 (held, not running).
	verdict, applied time.Duration
	requests         int
}

func TestFleetUnderTraffic(t *testing.T) {
	ep := runFleet(t, fleetBackends(t, 20))
	t.Logf("exposure window %v (plan-2's verdict after %v, the last pod's report after %v); %d requests, none failed",
		ep.window, ep.verdict, ep.applied, ep.requests)
}

// BenchmarkExposure measures the exposure window at
// $RENDERGATE_FLEET_BACKENDS backends (default 1,000), one episode per
// iteration, against bare `haproxy -c -f` on plan-2 (three runs around
// each episode), and reports the medians:
//
//	go test -run '^$' -bench Exposure -benchtime 7x
func BenchmarkExposure(b *testing.B) {
	backends := fleetBackends(b, 1000)
	hap := fleetHAProxy(b)
	bin := binary(b)
	var windows, bares, verdicts, applieds, alones, refusals []time.Duration
	for i := 0; i < b.N; i++ {
		ep := runFleet(b, backends)
		bare := bareCheck(b, hap, ep.bad, 3)
		alone := gateAlone(b, bin, hap, backends, ep.bad)
		refusal := podAlone(b, hap, backends, ep.bad)
		b.Logf("run %d: window %.1f ms, bare haproxy -c %.1f ms (verdict %.1f ms, last report %.1f ms; "+
			"verdict of an idle gate %.1f ms, refused reload of an idle pod %.1f ms)",
			i+1, ms(ep.window), ms(bare), ms(ep.verdict), ms(ep.applied), ms(alone), ms(refusal))
		windows, bares = append(windows, ep.window), append(bares, bare)
		verdicts, applieds = append(verdicts, ep.verdict), append(applieds, ep.applied)
		alones, refusals = append(alones, alone), append(refusals, refusal)
	}
	b.ReportMetric(ms(median(windows)), "window-ms")
	b.ReportMetric(ms(median(bares)), "bare-check-ms")
	b.ReportMetric(ms(median(windows))-ms(median(bares)), "window-minus-bare-ms")
	b.ReportMetric(ms(median(verdicts)), "verdict-ms")
	b.ReportMetric(ms(median(applieds)), "last-report-ms")
	b.ReportMetric(ms(median(alones)), "idle-gate-verdict-ms")
	b.ReportMetric(ms(median(refusals)), "idle-pod-refusal-ms")
}

// podAlone is the pods' own share of the window: how long one pod, with
// no other pod, gate or traffic beside it, takes to write bad, have its
// HAProxy refuse the reload and know it.
func podAlone(tb testing.TB, hap string, backends int, bad Rendered) time.Duration {
	t := &scoped{TB: tb}
	defer t.close()
	p := startPod(t, hap, t.TempDir(), "alone", fleetRender("plan-1", "r-1", backends, "127.0.0.1:9", false))
	start := time.Now()
	if _, loaded, err := p.apply(bad); err != nil || loaded {
		t.Fatalf("the idle pod must refuse plan-2: loaded %v, %v", loaded, err)
	}
	return time.Since(start)
}

// gateAlone is the gate's own share of the window: the time from sending
// bad to its verdict on a serve with no pods reloading and no traffic,
// after one good render (as in the episode, where plan-1 came first).
func gateAlone(t testing.TB, bin, hap string, backends int, bad Rendered) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	gate, err := Start(ctx, Options{Binary: bin, Args: []string{"--haproxy", hap, "--check-interval", "0s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close(ctx)
	verdict := func(r Rendered) time.Duration {
		start := time.Now()
		if err := gate.Send(ctx, r); err != nil {
			t.Fatal(err)
		}
		for {
			o, err := gate.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if g, ok := o.(*VerdictGroup); ok && g.Verdict.Render == r.Render {
				return time.Since(start)
			}
		}
	}
	verdict(fleetRender("plan-1", "r-1", backends, "127.0.0.1:9", false))
	return verdict(bad)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration{}, ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// bareCheck is the median wall time of n runs of `haproxy -c -f` on r laid
// out as a pod lays it out (plain haproxy: no gate, no sandbox).
func bareCheck(t testing.TB, hap string, r Rendered, n int) time.Duration {
	dir := t.TempDir()
	if err := writeTree(dir, renderFiles(r)); err != nil {
		t.Fatal(err)
	}
	var times []time.Duration
	for i := 0; i < n; i++ {
		cmd := exec.Command(hap, "-c", "-f", filepath.Join(dir, "haproxy.cfg"))
		cmd.Dir = dir // where a pod's HAProxy reads the map from
		start := time.Now()
		out, err := cmd.CombinedOutput()
		times = append(times, time.Since(start))
		if err == nil || !strings.Contains(string(out), "bogus-action") || strings.Contains(string(out), "hosts.map") {
			t.Fatalf("bare haproxy -c must refuse plan-2 for its bad line alone: %v\n%s", err, out)
		}
	}
	return median(times)
}

// runFleet runs one episode and checks everything the test asserts.
func runFleet(tb testing.TB, backends int) episode {
	t := &scoped{TB: tb}
	defer t.close()
	hap := fleetHAProxy(t)
	bin := binary(t)
	server := startBackend(t)
	r0 := fleetRender("plan-0", "r-0", backends, server, false)
	r1 := fleetRender("plan-1", "r-1", backends, server, false)
	r2 := fleetRender("plan-2", "r-2", backends, server, true)
	r3 := fleetRender("plan-3", "r-3", backends, server, false)

	dir := tb.TempDir()
	var pods []*pod
	for i := 0; i < fleetPods; i++ {
		pods = append(pods, startPod(t, hap, filepath.Join(dir, fmt.Sprintf("pod-%d", i)),
			fmt.Sprintf("fleet/haproxy-%d", i), r0))
	}
	traffic := startLoad(t, pods, backends)

	stderr := &lockedWriter{w: &strings.Builder{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gate, err := Start(ctx, Options{Binary: bin, Stderr: stderr,
		// Checks back to back: the window then measures a gate whose
		// last check started longer ago than --check-interval.
		Args: []string{"--haproxy", hap, "--start-held", "--check-interval", "0s"}})
	if err != nil {
		t.Fatal(err)
	}
	c := newController(t, gate, pods)
	defer func() {
		if t.Failed() {
			t.Logf("serve's log:\n%s", stderr.String())
		}
	}()

	// A held term: nothing dispatches before a pass.
	c.until("the term-start latch", func() bool { return len(c.lines) > 0 })
	c.send(PodsDiscovered{Pods: c.names()})
	for _, p := range pods {
		c.send(p.report())
	}
	c.untilServed(traffic, "plan-0", 10)

	// plan-1: held, passed, released, dispatched, promoted.
	c.render(r1)
	c.until("plan-1 loaded and promoted on every pod", func() bool { return c.pending == 0 && c.onBaseline("plan-1") })
	c.untilServed(traffic, "plan-1", 10)

	// plan-2: dispatched at once, refused by every pod's HAProxy and by
	// the gate, reverted.
	sent := time.Now()
	c.render(r2)
	c.until("plan-2 refused and every pod reverted", func() bool {
		return c.pending == 0 && len(c.reverts) >= fleetPods && c.group("r-2") != nil
	})
	ep := episode{bad: r2, window: c.revertAt[fleetPods-1].Sub(sent), verdict: c.groupAt["r-2"].Sub(sent),
		applied: c.heldAt[len(c.heldAt)-1].Sub(sent)}
	want1 := renderFiles(r1)
	for _, p := range pods {
		c.checkFiles(p, want1, "after the revert")
		if st := p.report(); st.Plan != "plan-1" || st.RunningPlan != "plan-1" || st.BaselinePlan != "plan-1" || p.failedReloads != 1 {
			t.Fatalf("%s after the revert: %+v, %d failed reloads (want plan-1 throughout, 1)", p.name, st, p.failedReloads)
		}
		// Requests went through the pod while plan-2 was on its disk.
		if n := traffic.overlapping(p.name, sent, c.revertAt[fleetPods-1]); n == 0 {
			t.Fatalf("%s: no request went through while plan-2 was exposed", p.name)
		}
	}
	c.untilServed(traffic, "plan-1", 10)

	// plan-3: held by the refusal's latch until it passes, then released.
	c.beforeDispatch = func(r Rendered) {
		if r.Render != "r-3" {
			return
		}
		if c.group("r-3") == nil {
			t.Fatal("plan-3 dispatched before its verdict")
		}
		for _, p := range pods {
			c.checkFiles(p, want1, "while plan-3 was held")
		}
	}
	c.render(r3)
	c.until("plan-3 released, loaded and promoted on every pod", func() bool { return c.pending == 0 && c.onBaseline("plan-3") })
	c.untilServed(traffic, "plan-3", 10)

	traffic.halt()
	rest, err := gate.Close(ctx)
	if err != nil {
		t.Fatalf("close: %v", err)
	}
	<-c.ended // the reader's io.EOF: every output it took is in c.outs
	for _, o := range rest {
		c.handle(o)
	}
	c.drain()
	if c.pending != 0 {
		t.Fatalf("outputs after the episode asked pods to act: %s", describe(rest))
	}

	// The gate's lines, as docs/protocol.md §2 has them.
	var verdicts []string
	for _, g := range c.groups {
		verdicts = append(verdicts, fmt.Sprintf("%s ok=%v refused=%v", g.Verdict.Render, g.Verdict.OK, g.Verdict.Refused))
	}
	if got, want := strings.Join(verdicts, "; "), "r-1 ok=true refused=false; r-2 ok=false refused=true; r-3 ok=true refused=false"; got != want {
		t.Fatalf("verdicts: %s\nwant %s", got, want)
	}
	if m := c.group("r-2").Verdict.Message; !strings.Contains(m, "bogus-action") {
		t.Fatalf("plan-2's refusal does not name the bad line: %s", m)
	}
	wantLines := []string{
		"latch pessimistic term-start (alone, first)",
		"r-1: latch optimistic", "r-1: release plan-1 r-1",
		"r-2: latch pessimistic refused",
		"r-3: latch optimistic", "r-3: release plan-3 r-3",
	}
	if got := strings.Join(c.lines, "\n"); got != strings.Join(wantLines, "\n") {
		t.Fatalf("latch and release lines:\n%s\nwant:\n%s", got, strings.Join(wantLines, "\n"))
	}
	var wantPromotes, wantReverts []string
	for _, p := range pods {
		wantPromotes = append(wantPromotes, p.name+" plan-1", p.name+" plan-3")
		wantReverts = append(wantReverts, p.name+" plan-2 to baseline")
	}
	sort.Strings(wantPromotes)
	sort.Strings(c.promotes)
	sort.Strings(c.reverts)
	if strings.Join(c.promotes, ", ") != strings.Join(wantPromotes, ", ") ||
		strings.Join(c.reverts, ", ") != strings.Join(wantReverts, ", ") {
		t.Fatalf("promotes %v, reverts %v\nwant %v, %v", c.promotes, c.reverts, wantPromotes, wantReverts)
	}

	// Every pod ends on its baseline, plan-3, byte for byte; none on plan-2.
	want3 := renderFiles(r3)
	for _, p := range pods {
		c.checkFiles(p, want3, "at the end")
		if st := p.report(); st.Plan != "plan-3" || st.RunningPlan != "plan-3" || st.BaselinePlan != "plan-3" {
			t.Fatalf("%s at the end: %+v", p.name, st)
		}
	}

	// No request failed. (Enough went through each pod for that to mean
	// something: the episode waited for 10 served by each pod at each step.)
	total, failures, plans := traffic.summary()
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... %d more", len(failures)-20))
		}
		t.Fatalf("%d of %d requests failed:\n%s", len(failures), total, strings.Join(failures, "\n"))
	}
	if plans["plan-2"] != 0 || plans["plan-1"] == 0 || plans["plan-3"] == 0 {
		t.Fatalf("requests served by plan: %v (plan-2 must never serve)", plans)
	}
	ep.requests = total
	return ep
}

// controller is the test's controller: it sends the gate what the pods
// report, dispatches renders unless the latch holds them, and has the pods
// act on every promote and revert, wherever they come.
type controller struct {
	t       testing.TB
	gate    *Client
	pods    map[string]*pod
	order   []string
	outs    chan Output
	ended   chan error
	reports chan agentReport

	held           bool      // the latch is pessimistic
	waiting        *Rendered // the newest render, held until its release
	pending        int       // pod actions not yet reported
	beforeDispatch func(Rendered)

	groups   []*VerdictGroup
	groupAt  map[string]time.Time
	lines    []string // latch and release lines, in order
	promotes []string
	reverts  []string
	revertAt []time.Time
	heldAt   []time.Time // reports of a plan held but not running
}

type agentReport struct {
	applied Applied
	err     error
}

func newController(t testing.TB, gate *Client, pods []*pod) *controller {
	c := &controller{t: t, gate: gate, pods: map[string]*pod{}, outs: make(chan Output, 1024),
		ended: make(chan error, 1), reports: make(chan agentReport, 64), groupAt: map[string]time.Time{}}
	for _, p := range pods {
		c.pods[p.name] = p
		c.order = append(c.order, p.name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for {
			o, err := gate.Next(ctx)
			if err != nil {
				c.ended <- err
				return
			}
			c.outs <- o
		}
	}()
	return c
}

func (c *controller) names() []string { return append([]string{}, c.order...) }

func (c *controller) send(ev Event) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.gate.Send(ctx, ev); err != nil {
		c.t.Fatalf("send %T: %v", ev, err)
	}
}

// render tells the gate of r and dispatches it, or holds it while the
// latch is pessimistic.
func (c *controller) render(r Rendered) {
	c.send(r)
	if c.held {
		c.waiting = &r
		return
	}
	c.dispatch(r)
}

func (c *controller) dispatch(r Rendered) {
	if c.beforeDispatch != nil {
		c.beforeDispatch(r)
	}
	for _, name := range c.order {
		p := c.pods[name]
		c.act(func() (Applied, bool, error) { return p.apply(r) })
	}
}

// act runs a pod's action on its own goroutine (a pod's reload must not
// stop the controller reading the gate) and reports what the pod then
// holds, when the action changed something.
func (c *controller) act(action func() (Applied, bool, error)) {
	c.pending++
	go func() {
		a, _, err := action()
		c.reports <- agentReport{applied: a, err: err}
	}()
}

func (c *controller) handle(o Output) {
	switch o := o.(type) {
	case *VerdictGroup:
		c.groups = append(c.groups, o)
		c.groupAt[o.Verdict.Render] = time.Now()
		if o.Latch != nil {
			c.latch(o.Verdict.Render+": ", o.Latch)
		}
		if o.Release != nil {
			c.release(o.Verdict.Render+": ", o.Release)
		}
		for _, d := range o.Decisions {
			c.handle(d)
		}
	case *Latch:
		where := "(alone)"
		if len(c.lines) == 0 {
			where = "(alone, first)"
		}
		c.latch("", o)
		c.lines[len(c.lines)-1] += " " + where
	case *Release:
		c.release("(alone) ", o)
	case *Promote:
		c.promotes = append(c.promotes, o.Pod+" "+o.Plan)
		p := c.pod(o.Pod)
		c.act(func() (Applied, bool, error) { return p.promote(o.Plan) })
	case *Revert:
		c.reverts = append(c.reverts, o.Pod+" "+o.Plan+" to "+o.To)
		c.revertAt = append(c.revertAt, time.Now())
		p := c.pod(o.Pod)
		c.act(func() (Applied, bool, error) { return p.revert(o.Plan, o.To) })
	default:
		c.t.Fatalf("unexpected output %T %+v", o, o)
	}
}

func (c *controller) pod(name string) *pod {
	p, ok := c.pods[name]
	if !ok {
		c.t.Fatalf("a decision for an unknown pod %q", name)
	}
	return p
}

func (c *controller) latch(where string, l *Latch) {
	line := where + "latch " + l.State
	if l.Reason != "" {
		line += " " + l.Reason
	}
	c.lines = append(c.lines, line)
	c.held = l.Pessimistic()
}

func (c *controller) release(where string, r *Release) {
	c.lines = append(c.lines, where+"release "+r.Plan+" "+r.Render)
	if c.waiting != nil && c.waiting.Render == r.Render {
		held := *c.waiting
		c.waiting = nil
		c.dispatch(held)
	}
}

// step handles one thing: a pod's report (sent to the gate) or an output.
func (c *controller) step(deadline time.Time) {
	c.t.Helper()
	select {
	case r := <-c.reports:
		c.pending--
		if r.err != nil {
			c.t.Fatal(r.err)
		}
		if r.applied.Plan != r.applied.RunningPlan {
			c.heldAt = append(c.heldAt, time.Now())
		}
		c.send(r.applied)
	case o := <-c.outs:
		c.handle(o)
	case err := <-c.ended:
		c.t.Fatalf("the gate ended: %v", err)
	case <-time.After(10 * time.Millisecond):
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out; lines so far %q, promotes %v, reverts %v, %d pod actions pending",
				c.lines, c.promotes, c.reverts, c.pending)
		}
	}
}

// until steps until done holds (generous deadline: a loaded 2-core machine).
func (c *controller) until(what string, done func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		c.step(deadline)
	}
}

// untilServed waits until every pod has served n more requests with plan.
func (c *controller) untilServed(l *load, plan string, n int) {
	c.t.Helper()
	base := map[string]int{}
	for name := range c.pods {
		base[name] = l.count(name, plan)
	}
	c.until(fmt.Sprintf("%d requests served by %s through every pod", n, plan), func() bool {
		for name := range c.pods {
			if l.count(name, plan)-base[name] < n {
				return false
			}
		}
		return true
	})
}

// drain handles what the gate's reader still holds once the gate ended.
func (c *controller) drain() {
	for {
		select {
		case o := <-c.outs:
			c.handle(o)
		default:
			return
		}
	}
}

func (c *controller) onBaseline(plan string) bool {
	for _, p := range c.pods {
		if p.report().BaselinePlan != plan {
			return false
		}
	}
	return true
}

func (c *controller) group(render string) *VerdictGroup {
	for _, g := range c.groups {
		if g.Verdict.Render == render {
			return g
		}
	}
	return nil
}

// checkFiles fails unless p's live files and its baseline are both want,
// byte for byte.
func (c *controller) checkFiles(p *pod, want map[string][]byte, when string) {
	c.t.Helper()
	live, err := p.liveFiles()
	if err != nil {
		c.t.Fatal(err)
	}
	base, err := p.baselineFiles()
	if err != nil {
		c.t.Fatal(err)
	}
	if d := sameTree(live, want); d != "" {
		c.t.Fatalf("%s %s: live files: %s", p.name, when, d)
	}
	if d := sameTree(base, want); d != "" {
		c.t.Fatalf("%s %s: baseline files: %s", p.name, when, d)
	}
}
