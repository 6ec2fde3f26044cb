// Package haptic is rendergate as a component of a Go controller shaped
// like HAPTIC (the HAProxy Template Ingress Controller): it takes the
// controller's events from its bus while the replica leads, feeds them to
// `rendergate serve` through the rendergate client, and publishes the
// gate's answers back on the bus as HAPTIC's own render gate does
// (RenderGateCompleted, then the latch, release, promote and revert events
// that follow it, in the protocol's order). Standard library only.
//
// It cannot import HAPTIC, so it names what it needs of the controller as
// three small interfaces, Bus, Logger and Metrics, which HAPTIC's satisfy
// through a thin wrapper (a *slog.Logger satisfies Logger as it is). The
// wrapper around a HAPTIC-like bus has this shape:
//
//	type busAdapter struct{ bus *busevents.EventBus }
//
//	func (b busAdapter) Events(ctx context.Context) <-chan any {
//		return b.bus.SubscribeLeaderOnly(ctx) // closed when ctx ends
//	}
//	func (b busAdapter) Publish(ev any) { b.bus.Publish(ev) }
//
//	gate := haptic.New(haptic.Config{
//		Bus:     busAdapter{bus},
//		Logger:  logger,         // *slog.Logger
//		Metrics: hapticMetrics,  // RecordConfigRejected, SetConfigPinned
//		Serve:   rendergate.Options{Binary: "rendergate", Args: []string{"--haproxy", "/usr/sbin/haproxy"}},
//	})
//	go func() { _ = gate.Start(leaderCtx) }() // once this replica leads
//
// The controller keeps its own jobs: executing PromoteBaseline and
// RevertPod on its pods, its agents, its CRD status (docs/embedding.md,
// "Swapping HAPTIC's render gate").
//
// A restart of serve is lossless: the client re-sends the pods, their last
// reports, every superseded render a pod holds and the newest render; the
// component publishes LatchChanged{Pessimistic: true, Reason: "restarted"}
// at once and, when the new gate's first verdict on the newest render is a
// pass, LatchChanged{Pessimistic: false} and RenderReleased for it.
package haptic

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	rendergate "rendergate.example/client"
)

// TemplateRendered is a render the controller dispatches (an input).
type TemplateRendered struct {
	PlanID, RenderID       string // RenderID: this exact occurrence (HAPTIC's render proof)
	Correlation, Causation string
	Config                 string
	Files                  []File
}

// File is one file of a render besides its config.
type File struct {
	Kind    string // "map", "cert", "ca", "crt-list", "general"
	Path    string
	Content []byte // any bytes; sent as text or base64 as the protocol says
}

// ConfigAppliedToPod is a pod's report of what it holds (an input).
type ConfigAppliedToPod struct {
	Namespace, Name               string
	PlanID, RenderID              string // what the pod applied; RenderID "" = unknown
	RunningPlanID, BaselinePlanID string // "" = unknown
}

// HAProxyPodTerminated forgets one pod (an input).
type HAProxyPodTerminated struct{ Namespace, Name string }

// HAProxyPodsDiscovered forgets every pod not listed (an input).
type HAProxyPodsDiscovered struct{ Pods []PodRef }

// PodRef names one pod.
type PodRef struct{ Namespace, Name string }

// LostLeadership starts a new term in the gate (an input).
type LostLeadership struct{}

// RenderGateCompleted is one verdict (an output): every verdict is
// published, never coalesced.
type RenderGateCompleted struct {
	PlanID, RenderID, Checksum              string
	OK, Refused, Newest, Pinned, Remembered bool
	Message                                 string
	DurationMs                              int64
	Correlation, Causation                  string // as given on the TemplateRendered
}

// LatchChanged says the latch moved (an output).
type LatchChanged struct {
	Pessimistic bool
	Reason      string // "refused", "unavailable", "term-start", "restarted"; "" when optimistic
}

// RenderReleased lets the scheduler dispatch a held render (an output).
type RenderReleased struct{ PlanID, RenderID string }

// PromoteBaseline moves a pod's rollback baseline to a plan whose content
// passed (an output).
type PromoteBaseline struct{ Namespace, Name, PlanID, RenderID string }

// RevertPod reverts a pod that took a refused plan without loading it (an
// output). To is "baseline" or a plan id that passed.
type RevertPod struct{ Namespace, Name, PlanID, To string }

// Bus is what the component needs of the controller's event bus.
type Bus interface {
	// Events delivers the bus's events while this replica leads; the
	// component ignores types it does not know. Closed when ctx ends.
	Events(ctx context.Context) <-chan any
	Publish(event any)
}

// Logger receives the component's records and the gate's own log lines
// as records (level, message, key-value fields).
type Logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

// Metrics is fed as HAPTIC's gate feeds its own.
type Metrics interface {
	RecordConfigRejected(validator string) // "haproxy", on a fresh refusal (not remembered)
	SetConfigPinned(pinned bool)           // on every newest verdict
}

// Config wires the component to its controller.
type Config struct {
	Bus          Bus
	Logger       Logger             // nil: discard
	Metrics      Metrics            // nil: none
	CheckTimeout time.Duration      // 0: 30 s
	Serve        rendergate.Options // how serve is started (binary, flags, restarts)
}

// healthMargin is how long past the check timeout a verdict may be late
// before HealthCheck calls the gate stuck (serve's own --health-margin).
const healthMargin = 5 * time.Second

// Component is the render gate inside a controller.
type Component struct {
	cfg Config
	log Logger

	mu sync.Mutex
	// stopped is why the gate stopped for good; nil while it runs.
	stopped error
	// waiting: render ids sent and not yet judged, with when they were
	// sent; only those the gate may still judge (waitingKept).
	waiting map[string]time.Time
	// causes are the renders' causations, for every verdict on them.
	causes causes
	// held: a restarted gate's first verdict on the newest render is
	// awaited; the latch was published pessimistic ("restarted").
	held bool
	// newest is the newest render sent: its verdict releases a held latch.
	newest string
	// rejudged are the renders judged before the last restart: the
	// restarted gate's verdicts on them again are published, but do not
	// count in the metrics a second time.
	rejudged map[string]bool
	// publishing is when the Publish under way began; zero when none is.
	publishing time.Time
	// client is the running gate's client; nil before Start and after.
	client *rendergate.Client
}

// New makes a component; Start runs it.
func New(cfg Config) *Component {
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = discard{}
	}
	return &Component{cfg: cfg, log: log, waiting: map[string]time.Time{}, causes: newCauses()}
}

// Pid is the running serve process's id (it changes with a restart); 0
// when the component is not running.
func (c *Component) Pid() int {
	c.mu.Lock()
	client := c.client
	c.mu.Unlock()
	if client == nil {
		return 0
	}
	return client.Pid()
}

// Logger is the component's logger (the configured one, or a discarding one).
func (c *Component) Logger() Logger { return c.log }

// HealthCheck is non-nil when the gate stopped for good (the client's
// restart limit, or Start ended) or is stuck (a render it owes a verdict
// waited longer than the check timeout plus its margin for it); nil
// otherwise, a restart in progress included. The gate owes a verdict on
// the newest render, and on a superseded one only while a pod holds it
// (docs/behaviour.md, "Which renders get checked"): such a render waits
// from when it was sent or first held, whichever is later.
func (c *Component) HealthCheck() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped != nil {
		return c.stopped
	}
	if c.client != nil && c.client.Restarting() {
		return nil
	}
	bound := c.cfg.CheckTimeout + healthMargin
	held := c.causes.held()
	if !c.publishing.IsZero() {
		if waited := time.Since(c.publishing); waited > bound {
			return fmt.Errorf("rendergate: an output has waited %v for the bus's Publish (bound %v)", waited.Round(time.Millisecond), bound)
		}
	}
	for render, since := range c.waiting {
		if render != c.newest {
			first, owed := held[render]
			if !owed {
				continue
			}
			if first.After(since) {
				since = first
			}
		}
		if waited := time.Since(since); waited > bound {
			return fmt.Errorf("rendergate: render %s has waited %v for its verdict (bound %v)", render, waited.Round(time.Millisecond), bound)
		}
	}
	return nil
}

// Start runs the gate until ctx ends, then returns nil. It returns an
// error at once when serve cannot be started (no hello: a missing binary,
// an unknown protocol major). Call it once the replica leads; cancel ctx
// when it stops leading. It returns even while the bus's Publish blocks:
// once ctx ended the component publishes nothing more (a Publish already
// under way may still return later).
func (c *Component) Start(ctx context.Context) error {
	opts := c.cfg.Serve
	opts.Args = append(append([]string{}, opts.Args...), c.flags(opts.Args)...)
	logs := newLogLines(c.log)
	opts.Stderr = logs
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// a term of its own (Start is called once per leadership term): what
	// the last one knew and why it ended are gone
	c.mu.Lock()
	c.stopped, c.held, c.newest, c.rejudged = nil, false, "", nil
	c.waiting = map[string]time.Time{}
	c.causes.newTerm()
	c.mu.Unlock()
	client, err := rendergate.Start(ctx, opts)
	if err != nil {
		c.stop(err)
		return err
	}
	c.mu.Lock()
	c.client = client
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.client = nil
		c.mu.Unlock()
	}()
	queue := newQueue()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.receive(ctx, queue) }()
	go func() { defer wg.Done(); c.send(ctx, client, queue) }()
	// Not waited for: it may be inside the bus's Publish, which takes no
	// context. It stops before its next Publish.
	go c.publish(ctx, client)
	<-ctx.Done()
	queue.close()
	wg.Wait()
	closing, done := context.WithTimeout(context.Background(), c.cfg.CheckTimeout)
	defer done()
	_, _ = client.Close(closing)
	logs.flush()
	c.stop(errors.New("rendergate: the component stopped (Start ended)"))
	return nil
}

// flags are serve's flags the component needs and the caller did not give:
// JSON logs (parsed into records) and the check timeout.
func (c *Component) flags(given []string) []string {
	has := func(flag string) bool {
		for _, a := range given {
			if a == flag || strings.HasPrefix(a, flag+"=") {
				return true
			}
		}
		return false
	}
	var extra []string
	if !has("--log-format") {
		extra = append(extra, "--log-format", "json")
	}
	if !has("--check-timeout") {
		// in milliseconds: serve takes one number and one unit, never Go's `1m30s`
		ms := strconv.FormatFloat(float64(c.cfg.CheckTimeout)/float64(time.Millisecond), 'f', -1, 64)
		extra = append(extra, "--check-timeout", ms+"ms")
	}
	return extra
}

// waitingKept is how many of the last renders sent may still be judged
// though no pod holds them: the gate keeps the newest, the one in flight
// and four superseded (docs/behaviour.md, "Which renders get checked").
const waitingKept = 6

// forgetUnjudgeable drops from waiting the renders the gate has dropped
// unjudged, so that waiting stays bounded under a stream of bursts
// (called with c.mu held).
func (c *Component) forgetUnjudgeable() {
	recent := map[string]bool{}
	for i := len(c.causes.order) - 1; i >= 0 && len(recent) < waitingKept; i-- {
		recent[c.causes.order[i]] = true
	}
	held := c.causes.held()
	for render := range c.waiting {
		if _, holds := held[render]; !recent[render] && !holds {
			delete(c.waiting, render)
		}
	}
}

func (c *Component) stop(why error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped == nil {
		c.stopped = why
	}
}

// receive takes every event from the bus into the queue at once, in order:
// the bus is never blocked by serve or by Publish. It ends with ctx (the
// bus closes Events then, too).
func (c *Component) receive(ctx context.Context, queue *queue) {
	events := c.cfg.Bus.Events(ctx)
	for {
		select {
		case ev, open := <-events:
			if !open {
				return
			}
			if converted, causation, ok := c.event(ev); ok {
				queue.push(item{ev: converted, causation: causation})
			}
		case <-ctx.Done():
			return
		}
	}
}

// send hands the queued events to serve in order; back-pressure from serve
// stops here, never at the bus.
func (c *Component) send(ctx context.Context, client *rendergate.Client, queue *queue) {
	for {
		it, ok := queue.pop(ctx)
		if !ok {
			return
		}
		ev := it.ev
		c.mu.Lock()
		switch e := ev.(type) {
		case rendergate.Rendered:
			c.waiting[e.Render] = time.Now()
			c.newest = e.Render
			c.causes.sent(e.Render, e.Plan, it.causation, func(render string) bool {
				_, awaiting := c.waiting[render]
				return awaiting
			})
			c.forgetUnjudgeable()
		case rendergate.Applied:
			c.causes.told(e.Pod, holding{render: e.Render, plan: e.Plan}, time.Now())
		case rendergate.PodTerminated:
			c.causes.terminated(e.Pod)
		case rendergate.PodsDiscovered:
			c.causes.discovered(e.Pods)
		case rendergate.LostLeadership:
			c.causes.newTerm()
			// the gate's new term starts from nothing: no verdict comes on
			// what was sent before
			c.waiting = map[string]time.Time{}
		}
		c.mu.Unlock()
		if err := client.Send(ctx, ev); err != nil {
			if ctx.Err() == nil {
				c.log.Error("rendergate: an event could not reach the gate; the bus's events are dropped until Start ends",
					"error", err.Error())
				c.stop(err)
				// nobody takes the queue's events any more: it must not grow
				queue.abandon()
			}
			return
		}
	}
}

// publish turns the gate's outputs into bus events, in the protocol's
// order, until ctx ends: it publishes nothing once ctx ended.
func (c *Component) publish(ctx context.Context, client *rendergate.Client) {
	for {
		out, err := client.Next(ctx)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("rendergate: the gate stopped for good", "error", err.Error())
				c.stop(err)
			}
			return
		}
		for _, ev := range c.outputs(out) {
			if ctx.Err() != nil {
				return
			}
			c.mu.Lock()
			c.publishing = time.Now()
			c.mu.Unlock()
			c.cfg.Bus.Publish(ev)
			c.mu.Lock()
			c.publishing = time.Time{}
			c.mu.Unlock()
		}
	}
}

// event converts a bus event (a value or a pointer) into the gate's, with
// a render's causation; ok is false for a type the component does not know.
func (c *Component) event(ev any) (_ rendergate.Event, causation string, ok bool) {
	if v := reflect.ValueOf(ev); v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil, "", false
		}
		ev = v.Elem().Interface()
	}
	switch e := ev.(type) {
	case TemplateRendered:
		files := make([]rendergate.File, 0, len(e.Files))
		for _, f := range e.Files {
			files = append(files, file(f))
		}
		return rendergate.Rendered{Plan: e.PlanID, Render: e.RenderID, Correlation: e.Correlation, Config: e.Config, Files: files},
			e.Causation, true
	case ConfigAppliedToPod:
		return rendergate.Applied{Pod: podName(e.Namespace, e.Name), Plan: e.PlanID, Render: e.RenderID,
			RunningPlan: e.RunningPlanID, BaselinePlan: e.BaselinePlanID}, "", true
	case HAProxyPodTerminated:
		return rendergate.PodTerminated{Pod: podName(e.Namespace, e.Name)}, "", true
	case HAProxyPodsDiscovered:
		pods := make([]string, 0, len(e.Pods))
		for _, p := range e.Pods {
			pods = append(pods, podName(p.Namespace, p.Name))
		}
		return rendergate.PodsDiscovered{Pods: pods}, "", true
	case LostLeadership:
		return rendergate.LostLeadership{}, "", true
	}
	return nil, "", false
}

// outputs converts one output of the gate into the bus events it makes, in order.
func (c *Component) outputs(out rendergate.Output) []any {
	switch o := out.(type) {
	case *rendergate.VerdictGroup:
		evs := []any{c.completed(o.Verdict)}
		if o.Latch != nil {
			evs = append(evs, latch(*o.Latch))
		}
		if o.Release != nil {
			evs = append(evs, RenderReleased{PlanID: o.Release.Plan, RenderID: o.Release.Render})
		}
		evs = append(evs, c.released(o)...)
		for _, d := range o.Decisions {
			evs = append(evs, c.outputs(d)...)
		}
		return evs
	case *rendergate.Latch:
		return []any{latch(*o)}
	case *rendergate.Release:
		return []any{RenderReleased{PlanID: o.Plan, RenderID: o.Render}}
	case *rendergate.Promote:
		ns, name := splitPod(o.Pod)
		return []any{PromoteBaseline{Namespace: ns, Name: name, PlanID: o.Plan, RenderID: o.Render}}
	case *rendergate.Revert:
		ns, name := splitPod(o.Pod)
		return []any{RevertPod{Namespace: ns, Name: name, PlanID: o.Plan, To: o.To}}
	case *rendergate.InputError:
		if r := o.Rendered; r != nil {
			// never judged, and never will be: the controller hears it as
			// a render that could not be checked
			c.log.Error("rendergate: the gate refused a render's input line", "render", r.Render,
				"line", o.Line, "message", o.Message)
			return []any{c.refusedInput(*r, o.Message)}
		}
		c.log.Warn("rendergate: the gate refused an input line", "line", o.Line, "message", o.Message)
	case *rendergate.Restarted:
		c.log.Warn("rendergate: serve restarted; the latch is held until the new gate passes the newest render",
			"cause", fmt.Sprint(o.Cause), "render", o.HoldRender)
		c.mu.Lock()
		// held until the new gate's first verdict on the newest render,
		// which the sender names (it may have sent a newer one than
		// HoldRender since), or on the first render sent, when none was
		c.held = true
		if c.newest == "" {
			c.newest = o.HoldRender
		}
		// the new gate got what waits at its start: waits count from now
		now := time.Now()
		for render := range c.waiting {
			c.waiting[render] = now
		}
		c.rejudged = c.causes.judgedRenders()
		c.mu.Unlock()
		return []any{LatchChanged{Pessimistic: true, Reason: "restarted"}}
	}
	return nil
}

// completed is the verdict's event, with the Correlation and Causation the
// render's TemplateRendered gave (every verdict on it: a could-not-run,
// the retry's, a restarted gate's again); it feeds the metrics and the
// health.
func (c *Component) completed(v rendergate.Verdict) RenderGateCompleted {
	c.mu.Lock()
	delete(c.waiting, v.Render)
	causation := c.causes.of[v.Render]
	again := c.rejudged[v.Render]
	delete(c.rejudged, v.Render)
	if v.OK || v.Refused {
		c.causes.judged(v.Render)
	}
	c.mu.Unlock()
	// a restarted gate's verdict on a render judged before: counted once
	if m := c.cfg.Metrics; m != nil && !again {
		if v.Refused && !v.Remembered {
			m.RecordConfigRejected("haproxy")
		}
		if v.Newest {
			m.SetConfigPinned(v.Pinned)
		}
	}
	return RenderGateCompleted{
		PlanID: v.Plan, RenderID: v.Render, Checksum: v.Checksum,
		OK: v.OK, Refused: v.Refused, Newest: v.Newest, Pinned: v.Pinned, Remembered: v.Remembered,
		Message: v.Message, DurationMs: int64(v.DurationMS),
		Correlation: v.Correlation, Causation: causation,
	}
}

// refusedInput is the event for a render whose line the gate refused: a
// could-not-run verdict the gate itself never gave (no checksum, no
// duration), so that the controller learns that it will not be judged.
func (c *Component) refusedInput(r rendergate.Rendered, message string) RenderGateCompleted {
	c.mu.Lock()
	delete(c.waiting, r.Render)
	if c.newest == r.Render {
		c.newest = "" // the gate's newest is the render before it
	}
	causation := c.causes.of[r.Render]
	c.mu.Unlock()
	return RenderGateCompleted{PlanID: r.Plan, RenderID: r.Render, Correlation: r.Correlation, Causation: causation,
		Message: "the gate refused the render's input line, so it is not checked: " + message}
}

// released: after a restart, the new gate's first verdict on the newest
// render ends the hold; a pass opens the latch and releases the render
// (the new gate, a new term, was never pessimistic and says neither).
func (c *Component) released(g *rendergate.VerdictGroup) []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	// (newest unknown: the render named was refused as input)
	if !c.held || !g.Verdict.Newest || (c.newest != "" && g.Verdict.Render != c.newest) {
		return nil
	}
	c.held = false
	if !g.Verdict.OK || g.Latch != nil || g.Release != nil {
		return nil // the gate's own latch (refused, unavailable) or release says it
	}
	return []any{
		LatchChanged{Pessimistic: false},
		RenderReleased{PlanID: g.Verdict.Plan, RenderID: g.Verdict.Render},
	}
}

func latch(l rendergate.Latch) LatchChanged {
	if !l.Pessimistic() {
		return LatchChanged{}
	}
	return LatchChanged{Pessimistic: true, Reason: l.Reason}
}

// file sends text as text and any other bytes as base64.
func file(f File) rendergate.File {
	if utf8.Valid(f.Content) {
		return rendergate.File{Kind: f.Kind, Path: f.Path, Content: string(f.Content)}
	}
	return rendergate.File{Kind: f.Kind, Path: f.Path, Content: base64.StdEncoding.EncodeToString(f.Content), Encoding: "base64"}
}

func podName(namespace, name string) string { return namespace + "/" + name }

func splitPod(pod string) (namespace, name string) {
	if namespace, name, ok := strings.Cut(pod, "/"); ok {
		return namespace, name
	}
	return "", pod
}

type discard struct{}

func (discard) Debug(string, ...any) {}
func (discard) Info(string, ...any)  {}
func (discard) Warn(string, ...any)  {}
func (discard) Error(string, ...any) {}
