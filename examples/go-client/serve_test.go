// The client against the real `rendergate serve` and real haproxy: the
// binary and haproxy are found as internal/testgate says; a missing
// binary fails these tests when $CI is set and skips them otherwise.

package rendergate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"rendergate.example/client/internal/testgate"
)

func binary(t testing.TB) string { return testgate.Binary(t) }

func haproxy() string { return testgate.HAProxy() }

func start(t *testing.T, args ...string) *Client {
	t.Helper()
	var stderr io.Writer
	if testing.Verbose() {
		stderr = os.Stderr
	}
	c, err := Start(context.Background(), Options{
		Binary:       binary(t),
		Args:         append([]string{"--haproxy", haproxy()}, args...),
		Stderr:       stderr,
		RestartDelay: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

// sample is examples/render: a config haproxy 2.6 takes and its map.
func sample(t *testing.T, plan, render string) Rendered {
	t.Helper()
	config, err := os.ReadFile("../render/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := os.ReadFile("../render/maps/hosts.map")
	if err != nil {
		t.Fatal(err)
	}
	return Rendered{Plan: plan, Render: render, Config: string(config),
		Files: []File{{Kind: "map", Path: "maps/hosts.map", Content: string(hosts)}}}
}

// broken is the sample with a line haproxy refuses, in its frontend.
func broken(t *testing.T, plan, render string) Rendered {
	r := sample(t, plan, render)
	r.Config = strings.Replace(r.Config, "    bind :8080\n", "    bind :8080\n    http-request bogus-action\n", 1)
	if !strings.Contains(r.Config, "bogus-action") {
		t.Fatal("the sample has no `bind :8080` line to break after")
	}
	return r
}

func send(t *testing.T, c *Client, events ...Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, ev := range events {
		if err := c.Send(ctx, ev); err != nil {
			t.Fatalf("send %#v: %v", ev, err)
		}
	}
}

func next(t *testing.T, c *Client) Output {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	o, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("next output: %v", err)
	}
	return o
}

func group(t *testing.T, c *Client) *VerdictGroup {
	t.Helper()
	o := next(t, c)
	g, ok := o.(*VerdictGroup)
	if !ok {
		t.Fatalf("want a verdict group, got %T %+v", o, o)
	}
	return g
}

func describe(outs []Output) string {
	var b strings.Builder
	for _, o := range outs {
		fmt.Fprintf(&b, "%T%+v ", o, o)
	}
	return b.String()
}

func TestHelloIsReadAndChecked(t *testing.T) {
	c := start(t)
	h := c.Hello()
	if h.Protocol != 1 || h.Version == "" || h.Policy != "default" || h.HAProxy == "" || h.HAProxy == "unknown" {
		t.Fatalf("hello: %+v", h)
	}
	if h.Sandbox != "strict" && h.Sandbox != "best-effort" && h.Sandbox != "off" {
		t.Fatalf("sandbox mode: %q", h.Sandbox)
	}
}

func TestAServeWithAnotherProtocolMajorIsRefused(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "fake-rendergate")
	script := "#!/bin/sh\n" +
		`echo '{"type":"hello","protocol":2,"version":"9.0.0","policy":"default","haproxy":"2.6","sandbox":"strict"}'` +
		"\nexec cat >/dev/null\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), Options{Binary: fake})
	var refused *UnsupportedProtocolError
	if !errors.As(err, &refused) || refused.Hello.Protocol != 2 || refused.Hello.Version != "9.0.0" {
		t.Fatalf("want UnsupportedProtocolError naming protocol 2, got %v (client %v)", err, c)
	}
}

func TestAGoodRenderPassesAndABadOneIsRefusedWithItsGroup(t *testing.T) {
	c := start(t)
	send(t, c,
		PodsDiscovered{Pods: []string{"haptic/haproxy-0", "haptic/haproxy-1"}},
		Applied{Pod: "haptic/haproxy-0", Render: "r-1", Plan: "plan-1", RunningPlan: "plan-1", BaselinePlan: "plan-0"},
		Applied{Pod: "haptic/haproxy-1", Render: "r-1", Plan: "plan-1", RunningPlan: "plan-1", BaselinePlan: "plan-0"},
	)
	good := sample(t, "plan-1", "r-1")
	good.Correlation = "c-1"
	send(t, c, good)
	g := group(t, c)
	v := g.Verdict
	if !v.OK || v.Refused || !v.Newest || v.Pinned || v.Plan != "plan-1" || v.Render != "r-1" ||
		v.Correlation != "c-1" || !strings.HasPrefix(v.Checksum, "sha256:") || g.Latch != nil || g.Release != nil {
		t.Fatalf("pass: %+v", g)
	}
	if len(g.Decisions) != 2 {
		t.Fatalf("both pods hold and run plan-1: two promotes in the group, got %s", describe(g.Decisions))
	}
	for _, d := range g.Decisions {
		if p, ok := d.(*Promote); !ok || p.Plan != "plan-1" {
			t.Fatalf("decision: %T %+v", d, d)
		}
	}

	// plan-2 is broken: pod 0 wrote it but its HAProxy did not load it,
	// pod 1 loaded it. Only pod 0 is reverted.
	send(t, c,
		Applied{Pod: "haptic/haproxy-0", Render: "r-2", Plan: "plan-2", RunningPlan: "plan-1", BaselinePlan: "plan-1"},
		Applied{Pod: "haptic/haproxy-1", Render: "r-2", Plan: "plan-2", RunningPlan: "plan-2", BaselinePlan: "plan-1"},
		broken(t, "plan-2", "r-2"),
	)
	g = group(t, c)
	if !g.Verdict.Refused || g.Verdict.OK || !strings.Contains(g.Verdict.Message, "bogus-action") {
		t.Fatalf("refusal: %+v", g.Verdict)
	}
	if g.Latch == nil || *g.Latch != (Latch{State: "pessimistic", Reason: "refused"}) || g.Release != nil {
		t.Fatalf("the refusal's latch comes in its group: %+v", g)
	}
	want := Revert{Pod: "haptic/haproxy-0", Plan: "plan-2", To: "baseline"}
	if len(g.Decisions) != 1 || *g.Decisions[0].(*Revert) != want {
		t.Fatalf("want only %+v in the group, got %s", want, describe(g.Decisions))
	}
	rest, err := c.Close(context.Background())
	if err != nil || len(rest) != 0 {
		t.Fatalf("close: %s %v", describe(rest), err)
	}
}

func TestAnErrorLineIsAValue(t *testing.T) {
	c := start(t, "--max-line", "1KiB")
	big := sample(t, "plan-1", "r-1")
	big.Config += "# " + strings.Repeat("x", 2048) + "\n"
	send(t, c, big, sample(t, "plan-2", "r-2"))
	o := next(t, c)
	e, ok := o.(*InputError)
	if !ok || e.Line != 1 || !strings.Contains(e.Message, "--max-line") || e.Rendered == nil || e.Rendered.Render != "r-1" {
		t.Fatalf("want an error naming line 1, its render r-1 and --max-line, got %T %+v", o, o)
	}
	if g := group(t, c); !g.Verdict.OK || g.Verdict.Render != "r-2" {
		t.Fatalf("the next line still works: %+v", g)
	}
}

// An error line on a render's line names that render; a restarted gate
// is not told it, and the render before it is the newest again: the one
// the restart holds the latch for and the new gate judges.
func TestARenderRefusedAsInputIsNamedAndNeverReplayed(t *testing.T) {
	c := start(t)
	send(t, c, sample(t, "plan-1", "r-1"))
	if g := group(t, c); !g.Verdict.OK || g.Verdict.Render != "r-1" {
		t.Fatalf("r-1: %+v", g.Verdict)
	}
	bad := sample(t, "plan-2", "r-2")
	bad.Files = append(bad.Files, File{Kind: "lua", Path: "x.lua", Content: "-- x\n"})
	send(t, c, bad, PodTerminated{Pod: "haptic/nobody"})
	o := next(t, c)
	e, ok := o.(*InputError)
	if !ok || e.Line != 2 || e.Rendered == nil || e.Rendered.Render != "r-2" {
		t.Fatalf("want an error on line 2 naming r-2, got %T %+v", o, o)
	}
	if err := syscall.Kill(c.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o = next(t, c)
	r, ok := o.(*Restarted)
	if !ok || r.HoldRender != "r-1" {
		t.Fatalf("want a restart holding the latch for r-1, got %T %+v", o, o)
	}
	if g := group(t, c); !g.Verdict.OK || g.Verdict.Render != "r-1" || !g.Verdict.Newest {
		t.Fatalf("the restarted gate judges r-1 as the newest: %+v", g.Verdict)
	}
}

func TestStartHeldGivesALoneTermStartLatchFirst(t *testing.T) {
	c := start(t, "--start-held")
	o := next(t, c)
	if l, ok := o.(*Latch); !ok || *l != (Latch{State: "pessimistic", Reason: "term-start"}) {
		t.Fatalf("want a lone term-start latch first, got %T %+v", o, o)
	}
	send(t, c, sample(t, "plan-1", "r-1"))
	g := group(t, c)
	if !g.Verdict.OK || g.Latch == nil || g.Latch.Pessimistic() || g.Release == nil ||
		*g.Release != (Release{Plan: "plan-1", Render: "r-1"}) {
		t.Fatalf("the pass opens the latch and releases r-1, in one group: %+v", g)
	}
}

func TestABlockedReaderLosesNothing(t *testing.T) {
	const pods = 2000
	c := start(t, "--check-interval", "0s")
	send(t, c, sample(t, "plan-1", "r-1"))
	if g := group(t, c); !g.Verdict.OK {
		t.Fatalf("plan-1: %+v", g.Verdict)
	}
	// Every applied of the passed plan-1 gets a promote: 2,000 lines, far
	// more than a pipe holds, while nobody reads.
	sent := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for i := 0; i < pods; i++ {
			err := c.Send(ctx, Applied{Pod: fmt.Sprintf("ns/pod-%04d", i), Plan: "plan-1",
				RunningPlan: "plan-1", BaselinePlan: "plan-0"})
			if err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	time.Sleep(time.Second)
	promoted := map[string]bool{}
	for len(promoted) < pods {
		o := next(t, c)
		var decisions []Output
		switch o := o.(type) {
		case *VerdictGroup:
			decisions = o.Decisions
		default:
			decisions = []Output{o}
		}
		for _, d := range decisions {
			p, ok := d.(*Promote)
			if !ok || p.Plan != "plan-1" || promoted[p.Pod] {
				t.Fatalf("after %d promotes: %T %+v", len(promoted), d, d)
			}
			promoted[p.Pod] = true
		}
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	rest, err := c.Close(context.Background())
	if err != nil || len(rest) != 0 {
		t.Fatalf("close: %s %v", describe(rest), err)
	}
}

func TestAKilledServeIsRestartedToldWhatItMustKnowAndTheNewestRenderIsHeld(t *testing.T) {
	// A long check interval keeps r-2 waiting in the first gate when it is killed.
	c := start(t, "--check-interval", "5s")
	send(t, c,
		PodsDiscovered{Pods: []string{"haptic/haproxy-0", "haptic/haproxy-1"}},
		Applied{Pod: "haptic/haproxy-0", Render: "r-1", Plan: "plan-1", RunningPlan: "plan-1", BaselinePlan: "plan-0"},
		sample(t, "plan-1", "r-1"),
	)
	if g := group(t, c); !g.Verdict.OK || len(g.Decisions) != 1 {
		t.Fatalf("plan-1: %+v", g)
	}
	bad := broken(t, "plan-2", "r-2")
	bad.Correlation = "c-2"
	send(t, c,
		Applied{Pod: "haptic/haproxy-0", Render: "r-2", Plan: "plan-2", RunningPlan: "plan-1", BaselinePlan: "plan-1"},
		bad,
	)
	first := c.Pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := next(t, c)
	r, ok := o.(*Restarted)
	if !ok || r.HoldRender != "r-2" || r.HoldPlan != "plan-2" || r.Cause == nil || r.Hello.Protocol != 1 {
		t.Fatalf("want a Restarted holding r-2, got %T %+v", o, o)
	}
	if c.Pid() == first || c.Pid() == 0 {
		t.Fatalf("still pid %d", first)
	}
	// The new gate judges the re-sent r-2 and reverts pod 0, which it
	// knows only from the re-sent pods and applied. (The superseded r-1,
	// re-sent before it, may be judged again first: a harmless repeat.)
	g := group(t, c)
	if g.Verdict.Render == "r-1" && g.Verdict.OK && len(g.Decisions) == 0 {
		g = group(t, c)
	}
	if g.Verdict.Render != "r-2" || !g.Verdict.Refused || g.Verdict.Correlation != "c-2" || g.Verdict.Pinned {
		t.Fatalf("verdict on the held render: %+v", g.Verdict)
	}
	want := Revert{Pod: "haptic/haproxy-0", Plan: "plan-2", To: "baseline"}
	if g.Latch == nil || g.Latch.Reason != "refused" || len(g.Decisions) != 1 || *g.Decisions[0].(*Revert) != want {
		t.Fatalf("want the latch and %+v in the group: %+v %s", want, g, describe(g.Decisions))
	}
	rest, err := c.Close(context.Background())
	if err != nil || len(rest) != 0 {
		t.Fatalf("close: %s %v", describe(rest), err)
	}
}

func TestCloseDrainsEveryOutputAndWaitsForTheExit(t *testing.T) {
	c := start(t, "--check-interval", "300ms")
	send(t, c, sample(t, "plan-1", "r-1"), broken(t, "plan-2", "r-2"), sample(t, "plan-3", "r-3"))
	pid := c.Pid()
	rest, err := c.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var renders []string
	for _, o := range rest {
		if g, ok := o.(*VerdictGroup); ok {
			renders = append(renders, g.Verdict.Render)
		}
	}
	// The first in flight, then the newest (r-2 is held by no pod).
	if strings.Join(renders, " ") != "r-1 r-3" {
		t.Fatalf("want the verdicts on r-1 and r-3 drained, got %s", describe(rest))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("serve (pid %d) still exists after Close: %v", pid, err)
	}
	if _, err := c.Next(context.Background()); err != io.EOF {
		t.Fatalf("after Close: %v", err)
	}
	if err := c.Send(context.Background(), LostLeadership{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("send after Close: %v", err)
	}
}

func TestCancellingTheContextStopsTheGate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c, err := Start(ctx, Options{Binary: binary(t), Args: []string{"--haproxy", haproxy()}})
	if err != nil {
		t.Fatal(err)
	}
	pid := c.Pid()
	cancel()
	if _, err := c.Next(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("after cancel: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("serve (pid %d) still exists after cancel: %v", pid, err)
	}
}
