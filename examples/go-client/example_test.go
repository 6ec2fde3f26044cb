// A controller's loop around the client, as README.md shows it; compiled
// by go test (it has no Output comment, so it is not run).

package rendergate_test

import (
	"context"
	"log"
	"os"

	rendergate "rendergate.example/client"
)

func ExampleStart() {
	ctx := context.Background()
	gate, err := rendergate.Start(ctx, rendergate.Options{
		Binary: "/path/to/rendergate",
		Args:   []string{"--haproxy", "/usr/sbin/haproxy", "--start-held"},
		Stderr: os.Stderr, // the gate's logs
	})
	if err != nil {
		log.Fatal(err) // a *rendergate.UnsupportedProtocolError among others
	}
	hello := gate.Hello()
	log.Printf("gate %s, policy %s, haproxy %s, sandbox %s", hello.Version, hello.Policy, hello.HAProxy, hello.Sandbox)

	// Read from a goroutine of its own: a reader that stops blocks the gate.
	go func() {
		for {
			out, err := gate.Next(ctx)
			if err != nil {
				return // io.EOF after Close
			}
			switch o := out.(type) {
			case *rendergate.VerdictGroup:
				log.Printf("verdict on %s: ok=%v; latch %v, release %v, %d decisions",
					o.Verdict.Render, o.Verdict.OK, o.Latch, o.Release, len(o.Decisions))
			case *rendergate.Latch:
				log.Printf("latch %s (%s): hold dispatch until a release", o.State, o.Reason)
			case *rendergate.Promote:
				log.Printf("%s may promote its baseline to %s", o.Pod, o.Plan)
			case *rendergate.Revert:
				log.Printf("revert %s from %s to %s", o.Pod, o.Plan, o.To)
			case *rendergate.InputError:
				log.Printf("the gate refused input line %d: %s", o.Line, o.Message)
			case *rendergate.Restarted:
				log.Printf("gate restarted (%v): hold dispatch until the verdict on %q", o.Cause, o.HoldRender)
			}
		}
	}()

	err = gate.Send(ctx, rendergate.Rendered{Plan: "plan-1", Render: "r-1", Config: "global\n",
		Files: []rendergate.File{{Kind: "map", Path: "maps/hosts.map", Content: "example.com be\n"}}})
	if err != nil {
		log.Fatal(err)
	}
	// ... Applied, PodsDiscovered, PodTerminated, LostLeadership as the fleet changes.

	// Close drains: the outputs still to come, then serve's exit.
	rest, err := gate.Close(ctx)
	log.Printf("%d last outputs, exit: %v", len(rest), err)
}
