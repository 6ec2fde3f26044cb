// Outputs: the values Client.Next delivers, parsed from serve's lines
// (docs/protocol.md §2, "Outputs"), and how a verdict's lines become one
// VerdictGroup.

package rendergate

import (
	"encoding/json"
	"fmt"
)

// An Output is one value from the gate: a *VerdictGroup, a *Latch, a
// *Promote or *Revert outside a verdict's group (an `applied` trigger's
// decisions), an *InputError, or a *Restarted from the client itself.
type Output interface {
	outputType() string
}

// Hello is serve's first line: who the gate is.
type Hello struct {
	// Protocol is the protocol's major version; this package knows 1.
	Protocol int    `json:"protocol"`
	Version  string `json:"version"`
	Policy   string `json:"policy"`
	HAProxy  string `json:"haproxy"`
	Sandbox  string `json:"sandbox"`
	// World is the world checks see: root, config-dir, fresh or none
	// (empty from a gate that does not say).
	World string `json:"world,omitempty"`
}

// Verdict is the gate's judgement of one render.
type Verdict struct {
	Plan        string `json:"plan"`
	Render      string `json:"render"`
	Checksum    string `json:"checksum"`
	OK          bool   `json:"ok"`
	Refused     bool   `json:"refused"`
	Newest      bool   `json:"newest"`
	Pinned      bool   `json:"pinned"`
	Remembered  bool   `json:"remembered"`
	Message     string `json:"message"`
	DurationMS  uint64 `json:"duration_ms"`
	Correlation string `json:"correlation,omitempty"`
}

// CouldNotRun says the check did not reach a verdict (reason in Message).
func (v Verdict) CouldNotRun() bool { return !v.OK && !v.Refused }

// Latch is a change of the latch: State is optimistic or pessimistic; a
// pessimistic one carries Reason (refused, unavailable or term-start).
type Latch struct {
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// Pessimistic says the scheduler must hold every render until a release.
func (l Latch) Pessimistic() bool { return l.State == "pessimistic" }

// Release lets the scheduler dispatch the render named.
type Release struct {
	Plan   string `json:"plan"`
	Render string `json:"render"`
}

// Promote lets a pod promote its baseline to Plan.
type Promote struct {
	Pod  string `json:"pod"`
	Plan string `json:"plan"`
	// Render is the render whose content passed, when the gate knows it.
	Render string `json:"render,omitempty"`
}

// Revert asks a pod holding Plan to go back To `baseline` or a passed plan.
type Revert struct {
	Pod  string `json:"pod"`
	Plan string `json:"plan"`
	To   string `json:"to"`
}

// InputError is serve's `error` line: an input line it could not take.
// Line counts from 1 over every line of the current serve process.
type InputError struct {
	Line    uint64 `json:"line"`
	Message string `json:"message"`
	// Rendered is the render whose line it was, when the client wrote that
	// line as a rendered event (a Start-ed or New client fills it in): the
	// gate never took it, and no verdict comes on it. A restarted gate is
	// not told it again.
	Rendered *Rendered `json:"-"`
}

// VerdictGroup is one verdict with the lines that came with it, in the
// protocol's order: verdict, latch (if it changed), release (if any), then
// the promote and revert lines, in the order they came.
type VerdictGroup struct {
	Verdict Verdict
	Latch   *Latch
	Release *Release
	// Decisions holds *Promote and *Revert values.
	Decisions []Output
}

// Restarted is the client's own value: serve died and was started again.
// The new gate is a new term that knows only what the client re-sent.
// When HoldRender is set, the controller must hold dispatch until the
// verdict on that render (the newest one, re-sent) arrives.
type Restarted struct {
	Hello Hello
	// Cause is how the previous serve ended.
	Cause error
	// HoldPlan and HoldRender name the newest render sent; both empty
	// when no render was known.
	HoldPlan   string
	HoldRender string
}

func (*VerdictGroup) outputType() string { return "verdict" }
func (*Latch) outputType() string        { return "latch" }
func (*Release) outputType() string      { return "release" }
func (*Promote) outputType() string      { return "promote" }
func (*Revert) outputType() string       { return "revert" }
func (*InputError) outputType() string   { return "error" }
func (*Restarted) outputType() string    { return "restarted" }

// parseLine reads one output line. An unknown type gives (nil, nil): a
// client ignores output types it does not know.
func parseLine(line []byte) (Output, *Verdict, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, nil, fmt.Errorf("rendergate: output line is not JSON: %w", err)
	}
	var out Output
	switch head.Type {
	case "verdict":
		v := new(Verdict)
		if err := json.Unmarshal(line, v); err != nil {
			return nil, nil, fmt.Errorf("rendergate: verdict line: %w", err)
		}
		return nil, v, nil
	case "latch":
		out = new(Latch)
	case "release":
		out = new(Release)
	case "promote":
		out = new(Promote)
	case "revert":
		out = new(Revert)
	case "error":
		out = new(InputError)
	default:
		return nil, nil, nil
	}
	if err := json.Unmarshal(line, out); err != nil {
		return nil, nil, fmt.Errorf("rendergate: %s line: %w", head.Type, err)
	}
	return out, nil, nil
}

// rank orders a verdict group's lines: a line may follow the verdict only
// in this order (latch, release at most once each; then decisions).
func rank(o Output) int {
	switch o.(type) {
	case *Latch:
		return 1
	case *Release:
		return 2
	case *Promote, *Revert:
		return 3
	}
	return 0
}

// join adds o to the group when the protocol's order allows it there.
func (g *VerdictGroup) join(o Output, last int) (int, bool) {
	r := rank(o)
	if r == 0 || r < last || (r == last && r < 3) {
		return last, false
	}
	switch o := o.(type) {
	case *Latch:
		g.Latch = o
	case *Release:
		g.Release = o
	default:
		g.Decisions = append(g.Decisions, o)
	}
	return r, true
}
