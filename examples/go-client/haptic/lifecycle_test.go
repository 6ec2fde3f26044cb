// The component across its life, against the real binary: leadership
// terms, restarts of serve, a bus that stops taking what is published,
// and a gate stopped for good (haptic-adapter's HealthCheck, restart and
// never-block rules; docs/embedding.md).

package haptic

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	rendergate "rendergate.example/client"
)

// started is a running component on b with the check timeout timeout and
// serve's options opts (the real binary and haproxy unless opts says).
func started(t *testing.T, b Bus, m Metrics, timeout time.Duration, opts rendergate.Options) (*Component, context.CancelFunc, chan error) {
	t.Helper()
	if opts.Binary == "" {
		opts.Binary = binary(t)
	}
	if opts.Args == nil {
		opts.Args = []string{"--haproxy", haproxy(), "--check-interval", "0s"}
	}
	if opts.RestartDelay == 0 {
		opts.RestartDelay = 50 * time.Millisecond
	}
	c := New(Config{Bus: b, Metrics: m, CheckTimeout: timeout, Serve: opts})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	running(t, c, done)
	return c, cancel, done
}

func isRestartedLatch(ev any) bool {
	return reflect.DeepEqual(ev, LatchChanged{Pessimistic: true, Reason: "restarted"})
}

// blockingBus holds Publish of what block picks until gate closes, and
// says on hit that it holds one.
type blockingBus struct {
	*bus
	mu    sync.Mutex
	gate  chan struct{}
	block func(ev any) bool
	hit   chan struct{}
}

func (g *blockingBus) Publish(ev any) {
	g.mu.Lock()
	gate, block := g.gate, g.block
	g.mu.Unlock()
	if block != nil && block(ev) {
		select {
		case g.hit <- struct{}{}:
		default:
		}
		<-gate
	}
	g.bus.Publish(ev)
}

// waitHit waits until g holds a Publish.
func (g *blockingBus) waitHit(t *testing.T, what string) {
	t.Helper()
	select {
	case <-g.hit:
	case <-time.After(patience):
		t.Fatalf("no %s within %v", what, patience)
	}
}

// Start is called once per leadership term: the second term's running
// gate is healthy, whatever ended the first.
func TestEachTermStartsHealthy(t *testing.T) {
	b := newBus()
	c := New(Config{Bus: b, CheckTimeout: 5 * time.Second,
		Serve: rendergate.Options{Binary: binary(t), Args: []string{"--haproxy", haproxy(), "--check-interval", "0s"}}})
	for term := 1; term <= 2; term++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Start(ctx) }()
		running(t, c, done)
		render := fmt.Sprintf("r-%d", term)
		b.in <- rendered("plan-1", render, good)
		b.until(t, "the verdict on "+render, func(evs []any) bool { return count(evs, verdictOn(render)) == 1 })
		if err := c.HealthCheck(); err != nil {
			t.Errorf("term %d: a running gate that just gave a verdict is unhealthy: %v", term, err)
		}
		cancel()
		<-done
		if c.HealthCheck() == nil {
			t.Errorf("term %d ended: a stopped gate is not healthy", term)
		}
	}
}

// serve dies before any render of the term: the latch is published held
// ("restarted"), and the first render's pass opens it and releases it.
func TestARestartBeforeAnyRenderIsReleasedByTheFirstPass(t *testing.T) {
	b := newBus()
	c, cancel, done := started(t, b, nil, 10*time.Second, rendergate.Options{})
	defer func() { cancel(); <-done }()
	b.in <- HAProxyPodsDiscovered{Pods: []PodRef{{"haptic", "haproxy-0"}}}
	b.untilDelivered(t, 1)
	killServe(t, c)
	b.until(t, "the restarted latch", func(evs []any) bool { return count(evs, isRestartedLatch) == 1 })
	b.in <- rendered("plan-1", "r-1", good)
	b.until(t, "the latch opened and r-1 released", func(evs []any) bool {
		return count(evs, func(ev any) bool { return reflect.DeepEqual(ev, LatchChanged{}) }) == 1 &&
			count(evs, func(ev any) bool { return reflect.DeepEqual(ev, RenderReleased{PlanID: "plan-1", RenderID: "r-1"}) }) == 1
	})
}

// A render sent while the restart's news waits behind a slow Publish is
// the newest: its pass releases it, never the older render the restart
// named.
func TestARenderSentDuringARestartIsTheOneReleased(t *testing.T) {
	inner := newBus()
	release := make(chan struct{})
	g := &blockingBus{bus: inner, hit: make(chan struct{}, 1), gate: release, block: verdictOn("r-1")}
	c, cancel, done := started(t, g, nil, 10*time.Second, rendergate.Options{})
	defer func() { cancel(); <-done }()
	inner.in <- rendered("plan-1", "r-1", good)
	g.waitHit(t, "verdict on r-1")
	g.mu.Lock()
	g.block = nil
	g.mu.Unlock()
	killServe(t, c)
	// the new serve is up (RestartDelay 50 ms); its news waits for the Publish
	time.Sleep(time.Second)
	inner.in <- rendered("plan-2", "r-2", good+"# 2\n")
	inner.untilDelivered(t, 2)
	time.Sleep(300 * time.Millisecond) // r-2 reaches the sender
	close(release)
	evs := inner.until(t, "r-2 released after the restart", func(evs []any) bool {
		for i, ev := range evs {
			if isRestartedLatch(ev) {
				return count(evs[i+1:], func(ev any) bool { r, ok := ev.(RenderReleased); return ok && r.RenderID == "r-2" }) == 1
			}
		}
		return false
	})
	if n := count(evs, func(ev any) bool { r, ok := ev.(RenderReleased); return ok && r.RenderID == "r-1" }); n != 0 {
		t.Errorf("r-1, superseded, released %d times:%s", n, show(evs))
	}
}

// HealthCheck is nil while a restart is under way (the backoff, here 9 s,
// outlasting the bound of 6 s), and a render waiting from before counts
// from the new gate's start.
func TestHealthyWhileARestartIsUnderWay(t *testing.T) {
	b := newBus()
	c, cancel, done := started(t, b, nil, time.Second, rendergate.Options{RestartDelay: 9 * time.Second})
	defer func() { cancel(); <-done }()
	pid := c.Pid()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil { // serve reads nothing more
		t.Fatal(err)
	}
	b.in <- rendered("plan-1", "r-1", good)
	b.untilDelivered(t, 1)
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second + healthMargin + time.Second)
	if !c.client.Restarting() {
		t.Fatalf("serve restarted before its backoff ended")
	}
	if err := c.HealthCheck(); err != nil {
		t.Errorf("7 s into a restart's 9 s backoff: %v", err)
	}
	b.until(t, "the restarted gate's verdict on r-1", func(evs []any) bool { return count(evs, verdictOn("r-1")) == 1 })
	if err := c.HealthCheck(); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}

// Once the gate stopped for good (no restart allowed), the bus's events
// are dropped, never queued for nobody: memory stays flat under 300 MiB
// of renders.
func TestAGateStoppedForGoodQueuesNothing(t *testing.T) {
	b := newBus()
	c, cancel, done := started(t, b, nil, 5*time.Second, rendergate.Options{MaxRestarts: -1})
	defer func() { cancel(); <-done }()
	killServe(t, c)
	for deadline := time.Now().Add(patience); c.HealthCheck() == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the gate never stopped")
		}
	}
	// the first event after the stop finds the gate gone
	b.in <- rendered("plan-0", "r-0", good)
	b.untilDelivered(t, 1)
	time.Sleep(100 * time.Millisecond)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	big := []byte(strings.Repeat("x", 1<<20))
	const n = 300
	for i := 0; i < n; i++ {
		b.in <- TemplateRendered{PlanID: "p", RenderID: fmt.Sprint("r-", i), Config: good,
			Files: []File{{Kind: "map", Path: "maps/a.map", Content: big}}}
	}
	b.untilDelivered(t, n+1)
	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grown := int64(after.HeapAlloc) - int64(before.HeapAlloc); grown > 64<<20 {
		t.Errorf("after the gate stopped for good, %d events of 1 MiB grew the heap by %d MiB", n, grown>>20)
	}
}

// A restart makes the new gate judge the newest render again: the
// verdict is published again, but the rejection is counted once and the
// pinned state is not undone by the new gate's first failure.
func TestARestartCountsNothingTwice(t *testing.T) {
	b, m := newBus(), &metrics{}
	c, cancel, done := started(t, b, m, 10*time.Second, rendergate.Options{})
	defer func() { cancel(); <-done }()
	b.in <- rendered("plan-1", "r-1", broken)
	b.until(t, "the refusal of r-1", func(evs []any) bool { return count(evs, verdictOn("r-1")) == 1 })
	b.in <- rendered("plan-2", "r-2", broken+"# 2\n")
	b.until(t, "the refusal of r-2", func(evs []any) bool { return count(evs, verdictOn("r-2")) == 1 })
	killServe(t, c)
	evs := b.until(t, "the restarted gate's verdict on r-2", func(evs []any) bool { return count(evs, verdictOn("r-2")) == 2 })
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rejected) != 2 || !reflect.DeepEqual(m.pinned, []bool{false, true}) {
		t.Errorf("two refused renders, one restart: rejected %v, pinned %v:%s", m.rejected, m.pinned, show(evs))
	}
}

// An output the bus's Publish has held past the check timeout and its
// margin makes HealthCheck non-nil; its end makes it nil again.
func TestAnOutputHeldByTheBusPastTheBoundIsUnhealthy(t *testing.T) {
	inner := newBus()
	release := make(chan struct{})
	g := &blockingBus{bus: inner, hit: make(chan struct{}, 1), gate: release, block: verdictOn("r-1")}
	c, cancel, done := started(t, g, nil, time.Second, rendergate.Options{})
	defer func() { cancel(); <-done }()
	inner.in <- rendered("plan-1", "r-1", good)
	g.waitHit(t, "verdict on r-1")
	time.Sleep(time.Second + healthMargin + 500*time.Millisecond)
	if err := c.HealthCheck(); err == nil || !strings.Contains(err.Error(), "for the bus's Publish") {
		t.Errorf("Publish held for more than the bound: HealthCheck = %v", err)
	}
	close(release)
	inner.until(t, "the verdict on r-1", func(evs []any) bool { return count(evs, verdictOn("r-1")) == 1 })
	if err := c.HealthCheck(); err != nil {
		t.Errorf("once published: %v", err)
	}
}

// A render whose line the gate refuses (a file kind the protocol does not
// have) is never judged: the controller hears it as a render that could
// not be checked, with its correlation and causation, and the gate stays
// healthy past the bound; the next render is judged as ever.
func TestARenderRefusedAsInputIsReportedNotAwaited(t *testing.T) {
	b := newBus()
	c, cancel, done := started(t, b, nil, time.Second, rendergate.Options{})
	defer func() { cancel(); <-done }()
	r := rendered("plan-1", "r-1", good)
	r.Files = append(r.Files, File{Kind: "lua", Path: "x.lua", Content: []byte("-- x\n")})
	b.in <- r
	evs := b.until(t, "an event on r-1", func(evs []any) bool { return count(evs, verdictOn("r-1")) == 1 })
	v := evs[0].(RenderGateCompleted)
	if v.OK || v.Refused || v.Correlation != "c-r-1" || v.Causation != "cause-r-1" ||
		!strings.Contains(v.Message, "refused the render's input line") {
		t.Errorf("the refused line's event: %+v", v)
	}
	time.Sleep(time.Second + healthMargin + 500*time.Millisecond)
	if err := c.HealthCheck(); err != nil {
		t.Errorf("a running, idle gate after a render refused as input: %v", err)
	}
	b.in <- rendered("plan-2", "r-2", good)
	b.until(t, "the verdict on r-2", func(evs []any) bool {
		return count(evs, func(ev any) bool { v, ok := ev.(RenderGateCompleted); return ok && v.RenderID == "r-2" && v.OK }) == 1
	})
}

// A serve killed in the middle of a log line: the restarted serve's first
// line still arrives as a record of its own (the cut line ends where the
// process did, instead of taking the next process's line into it).
func TestALogLineCutByADyingServeDoesNotSwallowTheNextServesFirstLine(t *testing.T) {
	const hello = `{"type":"hello","protocol":1,"version":"0.0.0-fake","policy":"default","haproxy":"none","sandbox":"off"}`
	dir := t.TempDir()
	marker, fake := filepath.Join(dir, "ran"), filepath.Join(dir, "fake-serve")
	script := fmt.Sprintf(`#!/bin/sh
echo '%s'
if [ ! -e '%s' ]; then
  touch '%s'
  printf '{"level":"INFO","message":"cut mid-wr' >&2
  kill -9 $$
fi
echo '{"level":"INFO","message":"second gate up"}' >&2
cat >/dev/null
`, hello, marker, marker)
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	log := &logger{}
	c := New(Config{Bus: newBus(), Logger: log, Serve: rendergate.Options{Binary: fake, RestartDelay: 10 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for !log.has("second gate up") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	arrived := log.has("second gate up")
	cancel()
	<-done
	if !arrived {
		log.mu.Lock()
		defer log.mu.Unlock()
		t.Fatalf("the restarted serve's first log line never arrived as a record; records: %+v", log.records)
	}
}
