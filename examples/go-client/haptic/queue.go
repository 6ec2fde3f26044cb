// The bus's events, queued in order between the bus and serve: pushing
// never blocks (the bus is never held up) and nothing is dropped while the
// gate runs (once it stopped for good, everything is: abandon); popping
// waits for an event or the end.

package haptic

import (
	"context"
	"sync"

	rendergate "rendergate.example/client"
)

type queue struct {
	mu     sync.Mutex
	events []item
	// ready has a token while events wait or the queue is closed.
	ready  chan struct{}
	closed bool
	// abandoned: nobody will pop again; what is pushed is dropped
	abandoned bool
}

func newQueue() *queue { return &queue{ready: make(chan struct{}, 1)} }

// item is one event for the gate, with a render's causation (the gate
// is not told it: the component puts it on the render's verdicts).
type item struct {
	ev        rendergate.Event
	causation string
}

func (q *queue) push(ev item) {
	q.mu.Lock()
	if !q.abandoned {
		q.events = append(q.events, ev)
	}
	q.mu.Unlock()
	q.signal()
}

// abandon drops what waits and all that is pushed from now on: the gate
// stopped for good, and the bus must still never be held up.
func (q *queue) abandon() {
	q.mu.Lock()
	q.abandoned, q.events = true, nil
	q.mu.Unlock()
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pop is the oldest event; false once the queue is closed and empty, or ctx is done.
func (q *queue) pop(ctx context.Context) (item, bool) {
	for {
		q.mu.Lock()
		if len(q.events) > 0 {
			ev := q.events[0]
			q.events[0] = item{}
			q.events = q.events[1:]
			more := len(q.events) > 0
			q.mu.Unlock()
			if more {
				q.signal()
			}
			return ev, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			return item{}, false
		}
		select {
		case <-q.ready:
		case <-ctx.Done():
			return item{}, false
		}
	}
}
