// Events in: the five input lines of docs/protocol.md §2, marshalled with
// `type` first, the exact field names, and optional fields omitted when
// unknown (empty).

package rendergate

import (
	"encoding/json"
	"fmt"
)

// An Event is one input line for `serve`.
type Event interface {
	// EventType is the line's `type`.
	EventType() string
}

// A File is one file of a render besides its config.
type File struct {
	// Kind is map, cert, ca, crt-list or general.
	Kind    string `json:"kind"`
	Path    string `json:"path"`
	Content string `json:"content"`
	// Encoding is "base64" when Content is the base64 of the file's bytes
	// (any bytes: a DER OCSP response); empty for text.
	Encoding string `json:"encoding,omitempty"`
}

// Rendered is a new render the controller means to dispatch.
type Rendered struct {
	Plan   string `json:"plan"`
	Render string `json:"render"`
	// Correlation, when set, comes back on the render's verdict.
	Correlation string `json:"correlation,omitempty"`
	Config      string `json:"config"`
	Files       []File `json:"files"`
}

// Applied is a pod's report of what it holds and runs.
type Applied struct {
	Pod  string `json:"pod"`
	Plan string `json:"plan"`
	// Render, RunningPlan and BaselinePlan are optional: empty means unknown.
	Render       string `json:"render,omitempty"`
	RunningPlan  string `json:"running_plan,omitempty"`
	BaselinePlan string `json:"baseline_plan,omitempty"`
}

// PodTerminated forgets one pod.
type PodTerminated struct {
	Pod string `json:"pod"`
}

// PodsDiscovered forgets every pod not listed.
type PodsDiscovered struct {
	Pods []string `json:"pods"`
}

// LostLeadership resets the gate: the next events start a new term.
type LostLeadership struct{}

func (Rendered) EventType() string       { return "rendered" }
func (Applied) EventType() string        { return "applied" }
func (PodTerminated) EventType() string  { return "pod_terminated" }
func (PodsDiscovered) EventType() string { return "pods_discovered" }
func (LostLeadership) EventType() string { return "lost_leadership" }

// MarshalJSON writes `files` as [] rather than null when there are none.
func (r Rendered) MarshalJSON() ([]byte, error) {
	type plain Rendered
	if r.Files == nil {
		r.Files = []File{}
	}
	return withType(r.EventType(), plain(r))
}

func (a Applied) MarshalJSON() ([]byte, error) {
	type plain Applied
	return withType(a.EventType(), plain(a))
}

func (p PodTerminated) MarshalJSON() ([]byte, error) {
	type plain PodTerminated
	return withType(p.EventType(), plain(p))
}

// MarshalJSON writes `pods` as [] rather than null: an empty list is
// meaningful (it forgets every pod).
func (p PodsDiscovered) MarshalJSON() ([]byte, error) {
	type plain PodsDiscovered
	if p.Pods == nil {
		p.Pods = []string{}
	}
	return withType(p.EventType(), plain(p))
}

func (l LostLeadership) MarshalJSON() ([]byte, error) {
	return withType(l.EventType(), struct{}{})
}

// withType marshals fields (a struct without MarshalJSON) and puts
// `"type":kind` first, as the protocol's lines have it.
func withType(kind string, fields interface{}) ([]byte, error) {
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("rendergate: %s marshals to %s, not an object", kind, body)
	}
	head, _ := json.Marshal(kind)
	line := append([]byte(`{"type":`), head...)
	if len(body) > 2 {
		line = append(line, ',')
	}
	return append(line, body[1:]...), nil
}

// Marshal is the NDJSON line (without its newline) for ev.
func Marshal(ev Event) ([]byte, error) {
	return json.Marshal(ev)
}
