// Every method honours its context, whatever else is blocked: a gate that
// reads nothing fills the queue, one Send waits on it for good, and another
// Send and Close, each with a deadline, still return at their deadline.

package rendergate

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

// slack is how late past its context a method may return.
const slack = 100 * time.Millisecond

func TestSendAndCloseReturnAtTheirDeadlineBehindABlockedSend(t *testing.T) {
	// The gate's input is a pipe nobody reads: the writer blocks on the
	// first line, the queue fills behind it.
	stdinReader, stdin := io.Pipe()
	defer stdinReader.Close()
	output, gateOutput := io.Pipe()
	go gateOutput.Write([]byte(hello1 + "\n"))
	c, err := New(output, stdin)
	if err != nil {
		t.Fatal(err)
	}
	defer gateOutput.Close()
	ev := Rendered{Plan: "plan-1", Render: "r-1", Config: strings.Repeat("x", 100)}
	// the writer's line, then a full queue
	for i := 0; i < queueSize+1; i++ {
		if err := c.Send(context.Background(), ev); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	blocked := make(chan error, 1)
	go func() { blocked <- c.Send(context.Background(), ev) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-blocked:
		t.Fatalf("a Send on a full queue returned: %v", err)
	default:
	}

	for _, timeout := range []time.Duration{200 * time.Millisecond, time.Millisecond} {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		started := time.Now()
		err := c.Send(ctx, ev)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send behind a blocked Send: %v, want the deadline", err)
		}
		if late := time.Since(started) - timeout; late > slack {
			t.Errorf("Send returned %v after its %v deadline", late, timeout)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	started := time.Now()
	_, err = c.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close behind a blocked Send: %v, want the deadline", err)
	}
	if late := time.Since(started) - time.Second; late > slack {
		t.Errorf("Close returned %v after its deadline", late)
	}
	// a Send after Close: closed, at once, whatever is still blocked
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	started = time.Now()
	if err := c.Send(ctx, ev); !errors.Is(err, ErrClosed) {
		t.Errorf("Send after Close: %v", err)
	}
	if late := time.Since(started) - time.Second; late > slack {
		t.Errorf("Send after Close returned %v after its deadline", late)
	}
}
