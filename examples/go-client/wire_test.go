// The wire format without a gate: events marshal as docs/protocol.md §2
// says, and a reader/writer pair's lines become the outputs doc.go
// describes.

package rendergate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEventsMarshalWithTheProtocolsNamesAndOmitUnknownFields(t *testing.T) {
	cases := []struct {
		event Event
		want  string
	}{
		{Rendered{Plan: "plan-1", Render: "r-1", Config: "global\n"},
			`{"type":"rendered","plan":"plan-1","render":"r-1","config":"global\n","files":[]}`},
		{&Rendered{Plan: "plan-1", Render: "r-1", Correlation: "c-1", Config: "x",
			Files: []File{{Kind: "map", Path: "maps/hosts.map", Content: "a b\n"}}},
			`{"type":"rendered","plan":"plan-1","render":"r-1","correlation":"c-1","config":"x",` +
				`"files":[{"kind":"map","path":"maps/hosts.map","content":"a b\n"}]}`},
		{Applied{Pod: "haptic/haproxy-0", Plan: "plan-1"},
			`{"type":"applied","pod":"haptic/haproxy-0","plan":"plan-1"}`},
		{Applied{Pod: "p", Plan: "plan-1", Render: "r-1", RunningPlan: "plan-0", BaselinePlan: "plan-0"},
			`{"type":"applied","pod":"p","plan":"plan-1","render":"r-1","running_plan":"plan-0","baseline_plan":"plan-0"}`},
		{PodTerminated{Pod: "p"}, `{"type":"pod_terminated","pod":"p"}`},
		{PodsDiscovered{}, `{"type":"pods_discovered","pods":[]}`},
		{PodsDiscovered{Pods: []string{"a", "b"}}, `{"type":"pods_discovered","pods":["a","b"]}`},
		{LostLeadership{}, `{"type":"lost_leadership"}`},
	}
	for _, c := range cases {
		got, err := Marshal(c.event)
		if err != nil || string(got) != c.want {
			t.Errorf("%#v:\n got %s (%v)\nwant %s", c.event, got, err, c.want)
		}
	}
}

const hello1 = `{"type":"hello","protocol":1,"version":"0.1.0","policy":"default","haproxy":"2.6.12","sandbox":"strict"}`

func TestAPairsLinesBecomeGroupsLoneValuesAndErrorsAndUnknownTypesAreIgnored(t *testing.T) {
	stream := strings.Join([]string{
		hello1,
		`{"type":"from-the-future","x":1}`,
		`{"type":"verdict","plan":"plan-2","render":"r-2","checksum":"sha256:0","ok":false,"refused":true,` +
			`"newest":true,"pinned":false,"remembered":false,"message":"bad","duration_ms":9,"correlation":"c-2"}`,
		`{"type":"latch","state":"pessimistic","reason":"refused"}`,
		`{"type":"revert","pod":"a","plan":"plan-2","to":"baseline"}`,
		`{"type":"error","line":7,"message":"not JSON"}`,
		`{"type":"promote","pod":"b","plan":"plan-1"}`,
		`{"type":"latch","state":"pessimistic","reason":"term-start"}`,
	}, "\n") + "\n"
	c, err := New(strings.NewReader(stream), &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Hello(); h != (Hello{Protocol: 1, Version: "0.1.0", Policy: "default", HAProxy: "2.6.12", Sandbox: "strict"}) {
		t.Fatalf("hello: %+v", h)
	}
	ctx := context.Background()
	next := func() Output {
		o, err := c.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	g, ok := next().(*VerdictGroup)
	if !ok || !g.Verdict.Refused || g.Verdict.Correlation != "c-2" || g.Verdict.DurationMS != 9 ||
		g.Latch == nil || *g.Latch != (Latch{State: "pessimistic", Reason: "refused"}) || g.Release != nil ||
		len(g.Decisions) != 1 || *g.Decisions[0].(*Revert) != (Revert{Pod: "a", Plan: "plan-2", To: "baseline"}) {
		t.Fatalf("group: %+v", g)
	}
	if e, ok := next().(*InputError); !ok || *e != (InputError{Line: 7, Message: "not JSON"}) {
		t.Fatalf("error line: %+v", e)
	}
	if p, ok := next().(*Promote); !ok || *p != (Promote{Pod: "b", Plan: "plan-1"}) {
		t.Fatalf("lone promote: %+v", p)
	}
	if l, ok := next().(*Latch); !ok || l.Reason != "term-start" {
		t.Fatalf("lone latch: %+v", l)
	}
	if o, err := c.Next(ctx); !errors.Is(err, ErrEnded) {
		t.Fatalf("after the end: %+v, %v", o, err)
	}
}

func TestAPairWithAnotherProtocolMajorIsRefused(t *testing.T) {
	_, err := New(strings.NewReader(strings.Replace(hello1, `"protocol":1`, `"protocol":2`, 1)+"\n"), &strings.Builder{})
	var refused *UnsupportedProtocolError
	if !errors.As(err, &refused) || refused.Hello.Protocol != 2 {
		t.Fatalf("want UnsupportedProtocolError for protocol 2, got %v", err)
	}
	if _, err := New(strings.NewReader(`{"type":"verdict"}`+"\n"), &strings.Builder{}); err == nil {
		t.Fatal("a first line that is not a hello was taken")
	}
}

func TestWhatARestartReSendsMirrorsTheGatesTerm(t *testing.T) {
	st := newState()
	st.record(PodsDiscovered{Pods: []string{"a", "b", "c"}})
	st.record(&Applied{Pod: "b", Plan: "plan-1"})
	st.record(Applied{Pod: "a", Plan: "plan-1"})
	st.record(Applied{Pod: "a", Plan: "plan-2", RunningPlan: "plan-1"})
	st.record(Applied{Pod: "c", Plan: "plan-1"})
	st.record(PodTerminated{Pod: "b"})
	st.record(PodsDiscovered{Pods: []string{"a", "d"}}) // c is forgotten
	st.record(Rendered{Plan: "plan-1", Render: "r-1"})
	st.record(&Rendered{Plan: "plan-2", Render: "r-2"})
	var got []string
	for _, ev := range st.replay() {
		line, err := Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(line))
	}
	want := []string{
		`{"type":"pods_discovered","pods":["a","d"]}`,
		`{"type":"applied","pod":"a","plan":"plan-2","running_plan":"plan-1"}`,
		`{"type":"rendered","plan":"plan-1","render":"r-1","config":"","files":[]}`, // superseded, kept as the gate keeps it
		`{"type":"rendered","plan":"plan-2","render":"r-2","config":"","files":[]}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("re-sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	st.record(LostLeadership{})
	if events := st.replay(); len(events) != 0 {
		t.Fatalf("a new term re-sends nothing, got %+v", events)
	}
}

func TestARestartReSendsEverySupersededRenderAPodStillHolds(t *testing.T) {
	st := newState()
	st.record(Rendered{Plan: "plan-1", Render: "r-1"})
	st.record(Applied{Pod: "a", Plan: "plan-1", Render: "r-1"}) // held by id
	st.record(Rendered{Plan: "plan-2", Render: "r-2a"})         // held by no one: among the last 4 kept
	st.record(Rendered{Plan: "plan-2", Render: "r-2b"})         // the plan's latest
	st.record(Applied{Pod: "b", Plan: "plan-2"})                // held by plan: r-2b
	st.record(Rendered{Plan: "plan-3", Render: "r-3"})          // held by no one
	st.record(Rendered{Plan: "plan-1", Render: "r-1"})          // r-1 again: its last occurrence counts
	st.record(Rendered{Plan: "plan-4", Render: "r-4"})          // the newest
	renders := func() string {
		var got []string
		for _, ev := range st.replay() {
			if r, ok := ev.(Rendered); ok {
				got = append(got, r.Render)
			}
		}
		return strings.Join(got, " ")
	}
	if got, want := renders(), "r-2a r-2b r-3 r-1 r-4"; got != want {
		t.Fatalf("re-sent renders %s, want %s", got, want)
	}
	// five more nobody holds: of those, the gate keeps the last 4
	for i := 5; i <= 9; i++ {
		st.record(Rendered{Plan: fmt.Sprintf("plan-%d", i), Render: fmt.Sprintf("r-%d", i)})
	}
	if got, want := renders(), "r-2b r-1 r-5 r-6 r-7 r-8 r-9"; got != want {
		t.Fatalf("re-sent renders %s, want %s", got, want)
	}
	st.record(Applied{Pod: "a", Plan: "plan-4", Render: "r-4"})
	st.record(PodTerminated{Pod: "b"})
	if got, want := renders(), "r-5 r-6 r-7 r-8 r-9"; got != want {
		t.Fatalf("no pod holds a superseded render: re-sent %s, want %s", got, want)
	}
	st.record(LostLeadership{})
	if events := st.replay(); len(events) != 0 {
		t.Fatalf("a new term re-sends nothing, got %+v", events)
	}
}
