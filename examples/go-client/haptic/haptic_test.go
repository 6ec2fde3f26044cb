// The component against the real rendergate binary and the real haproxy,
// on an in-memory bus: what a HAPTIC controller wired to it sees.

package haptic

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rendergate "rendergate.example/client"
	"rendergate.example/client/internal/testgate"
)

func binary(t testing.TB) string { return testgate.Binary(t) }

func haproxy() string { return testgate.HAProxy() }

const good = "global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" +
	"frontend f\n  bind 127.0.0.1:18080\n  http-request set-header x %[req.hdr(host),map(maps/hosts.map)]\n"

const broken = "global\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n" +
	"frontend f\n  bind 127.0.0.1:18080\n  use_backend nope\n"

func rendered(plan, render, config string) TemplateRendered {
	return TemplateRendered{PlanID: plan, RenderID: render, Correlation: "c-" + render, Causation: "cause-" + render,
		Config: config, Files: []File{{Kind: "map", Path: "maps/hosts.map", Content: []byte("a.example b\n")}}}
}

// bus is an in-memory bus: Events hands out what the test emits,
// Publish records (and may be slowed down).
type bus struct {
	in        chan any
	mu        sync.Mutex
	published []any
	// delivered counts the events the component took from Events.
	delivered int
	changed   chan struct{}
	delay     time.Duration
	// onPublish, when set, is told how many events were published so far
	// (set it with hook).
	onPublish func(n int)
}

func newBus() *bus { return &bus{in: make(chan any, 1024), changed: make(chan struct{}, 1)} }

// Events relays what the test emits until ctx ends, counting what the
// component takes.
func (b *bus) Events(ctx context.Context) <-chan any {
	out := make(chan any)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-b.in:
				select {
				case out <- ev:
					b.mu.Lock()
					b.delivered++
					b.mu.Unlock()
					b.notify()
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func (b *bus) Publish(ev any) {
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	b.mu.Lock()
	b.published = append(b.published, ev)
	n := len(b.published)
	hook := b.onPublish
	b.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	b.notify()
}

func (b *bus) hook(onPublish func(n int)) {
	b.mu.Lock()
	b.onPublish = onPublish
	b.mu.Unlock()
}

func (b *bus) notify() {
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

func (b *bus) events() []any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]any{}, b.published...)
}

// until waits for what makes ok true of the published events.
func (b *bus) until(t *testing.T, what string, ok func([]any) bool) []any {
	t.Helper()
	var evs []any
	b.wait(t, func() bool { evs = b.events(); return ok(evs) }, func() string {
		return fmt.Sprintf("no %s within %v; published: %s; outcome: %q", what, patience, show(evs), outcome(evs))
	})
	return evs
}

// untilDelivered waits until the component has taken n events from the bus.
func (b *bus) untilDelivered(t *testing.T, n int) {
	t.Helper()
	delivered := func() int { b.mu.Lock(); defer b.mu.Unlock(); return b.delivered }
	b.wait(t, func() bool { return delivered() >= n }, func() string {
		return fmt.Sprintf("the component took %d of %d events within %v", delivered(), n, patience)
	})
}

// patience bounds every wait for a state: reaching it is a failure, never
// a reason to go on.
const patience = 60 * time.Second

// wait waits for ok, woken by every delivery and publication.
func (b *bus) wait(t *testing.T, ok func() bool, failure func() string) {
	t.Helper()
	deadline := time.After(patience)
	for !ok() {
		select {
		case <-b.changed:
		case <-deadline:
			t.Fatal(failure())
		}
	}
}

func show(evs []any) string {
	var lines []string
	for _, ev := range evs {
		lines = append(lines, fmt.Sprintf("  %T %+v", ev, ev))
	}
	return "\n" + strings.Join(lines, "\n")
}

type record struct {
	level, message string
	args           []any
}

type logger struct {
	mu      sync.Mutex
	records []record
}

func (l *logger) add(level, msg string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, record{level, msg, args})
}
func (l *logger) has(message string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.records {
		if r.message == message {
			return true
		}
	}
	return false
}
func (l *logger) Debug(msg string, args ...any) { l.add("debug", msg, args) }
func (l *logger) Info(msg string, args ...any)  { l.add("info", msg, args) }
func (l *logger) Warn(msg string, args ...any)  { l.add("warn", msg, args) }
func (l *logger) Error(msg string, args ...any) { l.add("error", msg, args) }

type metrics struct {
	mu       sync.Mutex
	rejected []string
	pinned   []bool
}

func (m *metrics) RecordConfigRejected(v string) {
	m.mu.Lock()
	m.rejected = append(m.rejected, v)
	m.mu.Unlock()
}
func (m *metrics) SetConfigPinned(p bool) { m.mu.Lock(); m.pinned = append(m.pinned, p); m.mu.Unlock() }

func component(t *testing.T, b *bus, log *logger, m *metrics) (*Component, context.CancelFunc, chan error) {
	c := New(Config{Bus: b, Logger: log, Metrics: m, CheckTimeout: 10 * time.Second,
		Serve: rendergate.Options{Binary: binary(t), Args: []string{"--haproxy", haproxy(), "--check-interval", "0s"},
			RestartDelay: 50 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	running(t, c, done)
	return c, cancel, done
}

// running waits until Start holds a running serve (serve said hello: Pid
// names it), polling the state: nothing tells of it.
func running(t *testing.T, c *Component, done chan error) {
	t.Helper()
	for deadline := time.Now().Add(patience); c.Pid() == 0; time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("Start ended before serve ran: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start within %v", patience)
		}
	}
}

func count(evs []any, keep func(any) bool) int {
	n := 0
	for _, ev := range evs {
		if keep(ev) {
			n++
		}
	}
	return n
}

func verdictOn(render string) func(any) bool {
	return func(ev any) bool { v, ok := ev.(RenderGateCompleted); return ok && v.RenderID == render }
}

func TestVerdictsAndWhatFollowsThemArePublishedInTheProtocolsOrder(t *testing.T) {
	b, log, m := newBus(), &logger{}, &metrics{}
	c, cancel, done := component(t, b, log, m)
	b.in <- HAProxyPodsDiscovered{Pods: []PodRef{{"haptic", "haproxy-0"}, {"haptic", "haproxy-1"}}}
	b.in <- rendered("plan-1", "r-1", good)
	b.until(t, "the verdict on r-1", func(evs []any) bool { return count(evs, verdictOn("r-1")) == 1 })
	b.in <- &ConfigAppliedToPod{Namespace: "haptic", Name: "haproxy-0", PlanID: "plan-1", RenderID: "r-1",
		RunningPlanID: "plan-1", BaselinePlanID: "plan-0"}
	b.in <- ConfigAppliedToPod{Namespace: "haptic", Name: "haproxy-1", PlanID: "plan-2", RenderID: "r-2",
		RunningPlanID: "plan-1", BaselinePlanID: "plan-1"}
	b.in <- rendered("plan-2", "r-2", broken)
	evs := b.until(t, "the revert of haproxy-1", func(evs []any) bool {
		return count(evs, func(ev any) bool { _, ok := ev.(RevertPod); return ok }) == 1
	})
	at := func(keep func(any) bool) int {
		for i, ev := range evs {
			if keep(ev) {
				return i
			}
		}
		return -1
	}
	promote := at(func(ev any) bool {
		return reflect.DeepEqual(ev, PromoteBaseline{Namespace: "haptic", Name: "haproxy-0", PlanID: "plan-1", RenderID: "r-1"})
	})
	refusal := at(verdictOn("r-2"))
	latch := at(func(ev any) bool { return reflect.DeepEqual(ev, LatchChanged{Pessimistic: true, Reason: "refused"}) })
	revert := at(func(ev any) bool {
		return reflect.DeepEqual(ev, RevertPod{Namespace: "haptic", Name: "haproxy-1", PlanID: "plan-2", To: "baseline"})
	})
	if promote < 0 || refusal < 0 || latch < 0 || revert < 0 || !(refusal < latch && latch < revert) {
		t.Fatalf("promote %d, verdict %d, latch %d, revert %d:%s", promote, refusal, latch, revert, show(evs))
	}
	v := evs[refusal].(RenderGateCompleted)
	if !v.Refused || v.OK || !v.Newest || v.Correlation != "c-r-2" || v.Causation != "cause-r-2" ||
		!strings.Contains(v.Message, "use_backend") || !strings.HasPrefix(v.Checksum, "sha256:") {
		t.Errorf("the refusal: %+v", v)
	}
	m.mu.Lock()
	if !reflect.DeepEqual(m.rejected, []string{"haproxy"}) || !reflect.DeepEqual(m.pinned, []bool{false, false}) {
		t.Errorf("metrics: rejected %v, pinned %v", m.rejected, m.pinned)
	}
	m.mu.Unlock()
	if err := c.HealthCheck(); err != nil {
		t.Errorf("a running gate is healthy: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after its context ended: %v", err)
	}
	if c.HealthCheck() == nil {
		t.Errorf("a stopped gate is not healthy")
	}
	// the gate's own log lines arrived as records, fields and all
	log.mu.Lock()
	defer log.mu.Unlock()
	found := false
	for _, r := range log.records {
		if r.level == "warn" && r.message == "HAProxy refused the render" {
			for i := 0; i+1 < len(r.args); i += 2 {
				if r.args[i] == "render" && r.args[i+1] == "r-2" {
					found = true
				}
			}
		}
	}
	if !found {
		t.Errorf("no warn record of r-2's refusal among %d records: %+v", len(log.records), log.records)
	}
}

func TestStartFailsAtOnceWhenServeCannotStart(t *testing.T) {
	c := New(Config{Bus: newBus(), Serve: rendergate.Options{Binary: "/nonexistent/rendergate"}})
	started := time.Now()
	if err := c.Start(context.Background()); err == nil {
		t.Fatal("Start with no binary returned nil")
	}
	if time.Since(started) > 5*time.Second || c.HealthCheck() == nil {
		t.Errorf("took %v; health %v", time.Since(started), c.HealthCheck())
	}
}

func TestASlowPublishNeverBlocksTheBus(t *testing.T) {
	b, log, m := newBus(), &logger{}, &metrics{}
	b.delay = 20 * time.Millisecond
	_, cancel, done := component(t, b, log, m)
	defer func() { cancel(); <-done }()
	started := time.Now()
	for i := 0; i < 200; i++ {
		b.in <- rendered(fmt.Sprintf("plan-%d", i), fmt.Sprintf("r-%d", i), good)
	}
	// the bus's buffer (1024) takes them all only if the component keeps receiving
	if waited := time.Since(started); waited > time.Second {
		t.Errorf("emitting 200 events took %v", waited)
	}
	b.until(t, "the newest render's verdict", func(evs []any) bool { return count(evs, verdictOn("r-199")) == 1 })
}

// stuckBus is a bus whose Publish blocks until released: a controller's
// bus that is stuck.
type stuckBus struct {
	in      chan any
	entered chan struct{} // closed by the first Publish
	once    sync.Once
	release chan struct{}
}

func (b *stuckBus) Events(ctx context.Context) <-chan any { return testgate.Events(ctx, b.in) }

func (b *stuckBus) Publish(any) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
}

// A check timeout of a minute or more reaches serve in a form it takes
// (Go writes it `1m30s`; serve takes one number and one unit).
func TestACheckTimeoutOfAMinuteOrMoreIsGivenToServe(t *testing.T) {
	c := New(Config{CheckTimeout: 90 * time.Second})
	if got := strings.Join(c.flags(nil), " "); got != "--log-format json --check-timeout 90000ms" {
		t.Errorf("flags: %s", got)
	}
	b := newBus()
	c = New(Config{Bus: b, CheckTimeout: 90 * time.Second,
		Serve: rendergate.Options{Binary: binary(t), Args: []string{"--haproxy", haproxy(), "--check-interval", "0s"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	running(t, c, done)
	b.in <- rendered("plan-1", "r-1", good)
	b.until(t, "the verdict on r-1", func(evs []any) bool { return count(evs, verdictOn("r-1")) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after its context ended: %v", err)
	}
}

// HealthCheck follows the renders the gate owes a verdict, as a HAPTIC
// liveness probe does (docs/behaviour.md, "Which renders get checked"): a
// burst's superseded renders, which no pod holds and the gate never
// checks, leave it healthy past the bound; the newest render kept waiting
// by a gate that no longer moves (serve stopped by SIGSTOP) makes it
// unhealthy, naming the render, until its verdict comes.
func TestHealthFollowsOnlyTheRendersTheGateOwesAVerdict(t *testing.T) {
	b := newBus()
	c := New(Config{Bus: b, CheckTimeout: time.Second,
		Serve: rendergate.Options{Binary: binary(t), Args: []string{"--haproxy", haproxy(), "--check-interval", "0s"}}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	running(t, c, done)
	bound := time.Second + healthMargin
	distinct := func(i int) string { return fmt.Sprintf("%s# %d\n", good, i) }
	for i := 1; i <= 4; i++ {
		b.in <- rendered(fmt.Sprintf("plan-%d", i), fmt.Sprintf("r-%d", i), distinct(i))
	}
	burst := time.Now()
	evs := b.until(t, "the verdict on r-4", func(evs []any) bool { return count(evs, verdictOn("r-4")) == 1 })
	unjudged := 0
	for _, render := range []string{"r-1", "r-2", "r-3"} {
		if count(evs, verdictOn(render)) == 0 {
			unjudged++
		}
	}
	if unjudged == 0 {
		t.Fatalf("every render of the burst was judged: nothing superseded to test with:%s", show(evs))
	}
	time.Sleep(time.Until(burst.Add(bound + 500*time.Millisecond)))
	if err := c.HealthCheck(); err != nil {
		t.Errorf("%d superseded renders no pod holds made the gate unhealthy: %v", unjudged, err)
	}

	pid := c.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	b.in <- rendered("plan-5", "r-5", distinct(5))
	sent := time.Now()
	time.Sleep(bound / 2)
	if err := c.HealthCheck(); err != nil {
		t.Errorf("unhealthy within the bound: %v", err)
	}
	time.Sleep(time.Until(sent.Add(bound + 500*time.Millisecond)))
	if err := c.HealthCheck(); err == nil || !strings.Contains(err.Error(), "render r-5 has waited") {
		t.Errorf("a gate that keeps the newest render waiting past the bound: health %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	b.until(t, "the verdict on r-5", func(evs []any) bool { return count(evs, verdictOn("r-5")) == 1 })
	if err := c.HealthCheck(); err != nil {
		t.Errorf("after the verdict: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start after its context ended: %v", err)
	}
}

// A controller losing leadership gets Start back while its bus is stuck:
// Start returns nil once ctx ends, even with Publish blocked.
func TestStartReturnsWhenItsContextEndsWhilePublishBlocks(t *testing.T) {
	b := &stuckBus{in: make(chan any, 16), entered: make(chan struct{}), release: make(chan struct{})}
	defer close(b.release)
	c := New(Config{Bus: b, CheckTimeout: 10 * time.Second,
		Serve: rendergate.Options{Binary: binary(t), Args: []string{"--haproxy", haproxy(), "--check-interval", "0s"}}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	running(t, c, done)
	b.in <- rendered("plan-1", "r-1", good)
	b.in <- rendered("plan-2", "r-2", good)
	select {
	case <-b.entered: // the verdict on r-1 is being published, and stays so
	case err := <-done:
		t.Fatalf("Start returned before any Publish: %v", err)
	case <-time.After(patience):
		t.Fatalf("no Publish within %v", patience)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Start after its context ended: %v", err)
		}
	case <-time.After(patience):
		t.Fatalf("Start did not return within %v of its context's end while Publish blocked", patience)
	}
	if c.HealthCheck() == nil {
		t.Errorf("a stopped gate is not healthy")
	}
}

// Every verdict of a render carries the Correlation and Causation its
// TemplateRendered gave: a could-not-run verdict, the retry's pass, and a
// restarted gate's verdict on it again.
func TestEveryVerdictOfARenderCarriesItsCorrelationAndCausation(t *testing.T) {
	// the haproxy the gate is given is not there yet: r-1's first check cannot run
	dir := t.TempDir()
	hap := filepath.Join(dir, "haproxy")
	b, log := newBus(), &logger{}
	c := New(Config{Bus: b, Logger: log, CheckTimeout: 10 * time.Second,
		Serve: rendergate.Options{Binary: binary(t), Args: []string{"--haproxy", hap, "--check-interval", "0s"},
			RestartDelay: 50 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() { cancel(); <-done }()
	running(t, c, done)
	b.in <- rendered("plan-1", "r-1", good)
	b.until(t, "r-1's could-not-run verdict", func(evs []any) bool {
		return strings.Contains(outcome(evs), "verdict r-1 could-not-run")
	})
	// it is there now (a copy, whole before it has its name): the gate's retry passes
	bin, err := os.ReadFile(haproxy())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hap+".new", bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(hap+".new", hap); err != nil {
		t.Fatal(err)
	}
	b.until(t, "r-1's pass", func(evs []any) bool { return strings.Contains(outcome(evs), "verdict r-1 pass") })
	killServe(t, c)
	b.until(t, "the restarted gate's verdict on r-1", func(evs []any) bool {
		for i, ev := range evs {
			if reflect.DeepEqual(ev, LatchChanged{Pessimistic: true, Reason: "restarted"}) {
				return count(evs[i+1:], verdictOn("r-1")) > 0
			}
		}
		return false
	})
	evs := b.events()
	for _, ev := range evs {
		if v, ok := ev.(RenderGateCompleted); ok && (v.Correlation != "c-r-1" || v.Causation != "cause-r-1") {
			t.Errorf("a verdict on r-1 with correlation %q, causation %q:%s", v.Correlation, v.Causation, show(evs))
		}
	}
	if n := count(evs, verdictOn("r-1")); n < 3 {
		t.Errorf("%d verdicts on r-1, want 3 or more:%s", n, show(evs))
	}
}

// outcome is what a controller acts on: each render's verdict kind, and
// the promotions and reverts, as sets (a repeat after a restart is harmless).
func outcome(evs []any) string {
	seen := map[string]bool{}
	for _, ev := range evs {
		switch e := ev.(type) {
		case RenderGateCompleted:
			kind := "pass"
			if e.Refused {
				kind = "refused"
			} else if !e.OK {
				kind = "could-not-run"
			}
			seen["verdict "+e.RenderID+" "+kind] = true
		case PromoteBaseline:
			seen["promote "+e.Name+" "+e.PlanID] = true
		case RevertPod:
			seen["revert "+e.Name+" "+e.PlanID+" "+e.To] = true
		}
	}
	var lines []string
	for l := range seen {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}

// step is one input of an episode and what the controller waits to see
// after it before the next ("" for nothing): a controller reports a pod's
// new plan after it saw the verdict that let it out, so the episode's
// outcome does not depend on timing.
type step struct {
	input any
	until string
}

// killServe kills c's serve process (the caller made sure one runs).
func killServe(t *testing.T, c *Component) {
	pid := c.Pid()
	if pid == 0 {
		t.Error("no serve to kill")
		return
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Error(err)
	}
}

// episode is a scripted stretch of a controller's life; killAfter >= 0
// kills serve once the component holds that input, killAtOutput > 0 right
// after the component published that many events. Every wait is for a
// state: the step's outcome, the input taken, and after a kill, the
// restarted gate's verdict on every render it must judge again (then it
// has nothing more to say); the component is stopped before its events
// are read, so none comes after.
func episode(t *testing.T, killAfter, killAtOutput int) (string, []any) {
	applied := func(pod, plan, render, running, baseline string) ConfigAppliedToPod {
		return ConfigAppliedToPod{Namespace: "haptic", Name: pod, PlanID: plan, RenderID: render,
			RunningPlanID: running, BaselinePlanID: baseline}
	}
	steps := []step{
		{HAProxyPodsDiscovered{Pods: []PodRef{{"haptic", "haproxy-0"}, {"haptic", "haproxy-1"}}}, ""},
		{rendered("plan-1", "r-1", good), "verdict r-1 pass"},
		{applied("haproxy-0", "plan-1", "r-1", "plan-1", "plan-0"), "promote haproxy-0 plan-1"},
		{applied("haproxy-1", "plan-1", "r-1", "plan-0", "plan-0"), "promote haproxy-1 plan-1"},
		// r-2 is refused and superseded by r-3 before haproxy-1 reports it
		// (judged first, so that every run publishes the same events: the
		// kills at an output below count on it)
		{rendered("plan-2", "r-2", broken), "verdict r-2 refused"},
		{rendered("plan-3", "r-3", good), "verdict r-3 pass"},
		{applied("haproxy-1", "plan-2", "r-2", "plan-1", "plan-1"), "revert haproxy-1 plan-2 baseline"},
	}
	t.Logf("episode: kill after input %d, at output %d", killAfter, killAtOutput)
	b, log, m := newBus(), &logger{}, &metrics{}
	c, cancel, done := component(t, b, log, m)
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		}
	}
	defer stop()
	if killAtOutput > 0 {
		b.hook(func(n int) {
			if n == killAtOutput {
				killServe(t, c)
			}
		})
	}
	for i, s := range steps {
		b.in <- s.input
		if i == killAfter {
			b.untilDelivered(t, i+1) // the input is the component's
			killServe(t, c)
		}
		if s.until != "" {
			b.until(t, s.until, func(evs []any) bool { return strings.Contains(outcome(evs), s.until) })
		}
	}
	if killAfter >= 0 || killAtOutput > 0 {
		// The restarted gate judges again every render a pod holds and the
		// newest (or is sent them after the kill): r-1, r-2 and r-3.
		b.until(t, "the restarted gate's verdicts on r-1, r-2 and r-3", func(evs []any) bool {
			for i, ev := range evs {
				if reflect.DeepEqual(ev, LatchChanged{Pessimistic: true, Reason: "restarted"}) {
					after := evs[i+1:]
					return count(after, verdictOn("r-1")) > 0 && count(after, verdictOn("r-2")) > 0 &&
						count(after, verdictOn("r-3")) > 0
				}
			}
			return false
		})
	}
	stop()
	evs := b.events()
	return outcome(evs), evs
}

// Killing serve after any input changes nothing the controller acts on:
// every verdict, promotion and revert of the run without the kill comes
// (repeats allowed: a restarted gate judges again what pods hold).
func TestKillingServeAfterAnyInputOrOutputChangesNothingTheFleetDoes(t *testing.T) {
	want, plain := episode(t, -1, 0)
	if want != "promote haproxy-0 plan-1; promote haproxy-1 plan-1; revert haproxy-1 plan-2 baseline; "+
		"verdict r-1 pass; verdict r-2 refused; verdict r-3 pass" {
		t.Fatalf("the episode without a kill: %s", want)
	}
	check := func(when string, got string, evs []any) {
		if got != want {
			t.Errorf("killed %s:\n got %s\nwant %s%s", when, got, want, show(evs))
		}
		restarted := count(evs, func(ev any) bool {
			return reflect.DeepEqual(ev, LatchChanged{Pessimistic: true, Reason: "restarted"})
		})
		if restarted != 1 {
			t.Errorf("killed %s: %d restarted latches%s", when, restarted, show(evs))
		}
	}
	for k := 0; k < 7; k++ {
		got, evs := episode(t, k, 0)
		check(fmt.Sprintf("after input %d", k), got, evs)
	}
	for k := 1; k <= len(plain); k++ {
		got, evs := episode(t, -1, k)
		check(fmt.Sprintf("after output %d (%T)", k, plain[k-1]), got, evs)
	}
}
