// Package rendergate is a Go client for `rendergate serve`, the render gate
// for HAProxy fleets: it starts the gate (or wraps any reader/writer pair
// speaking its protocol), sends it typed events and hands back its outputs
// as values. The contract is docs/protocol.md §2 in the rendergate
// repository; the behaviour behind it is docs/behaviour.md.
//
// # Starting
//
// Start runs `rendergate serve` with Options.Args (stdin and stdout are the
// client's pipes; stderr, the gate's logs, goes to Options.Stderr). New
// wraps a pair instead: the gate's output as an io.Reader, its input as an
// io.Writer. Both read the gate's first line, its hello, before returning,
// and refuse a protocol major other than ProtocolMajor with an
// *UnsupportedProtocolError. Client.Hello gives the hello: the gate's
// version, live policy, haproxy version and sandbox mode.
//
// # Events and outputs
//
// Send takes Rendered, Applied, PodTerminated, PodsDiscovered and
// LostLeadership (values or pointers). Optional fields left empty are
// omitted from the line: absent means unknown to the gate.
//
// Every method honours its context whatever else is blocked: a Send
// behind another Send waiting on a full queue, or a Close behind both,
// returns when its own context is done (no lock is held while waiting).
//
// Send returns once the event's line is queued, not once it is written to
// serve's stdin, let alone read: nil means the line waits in the client's
// queue (at most 64 lines, behind the one being written) and will be
// written in order, unless serve dies first (then what it told the gate is
// re-sent, below). The protocol has no acknowledgement besides the gate's
// outputs: a rendered event is taken when its verdict comes, a line the
// gate refused comes back as an *InputError. Close returns only after
// every queued line was written.
//
// Next returns one Output at a time:
//
//   - *VerdictGroup: a verdict with the lines that came with it (latch,
//     release, promote and revert);
//   - *Latch: a latch change on its own, such as `term-start` at the start
//     of a term under `serve --start-held`;
//   - *Promote, *Revert: decisions outside a verdict's group, such as an
//     `applied` event's;
//   - *InputError: an input line the gate refused (its line number counts
//     the lines of the current serve process); Rendered names the render
//     when the line was one, which the gate then never judges, and which
//     a restarted gate is not told;
//   - *Restarted: the client's own value after a restart (below).
//
// Output types this package does not know are skipped, never an error: a
// newer gate may add some.
//
// # Verdict groups
//
// serve writes a verdict and its latch, release, promote and revert lines
// with one write, and nothing comes between them. The client takes as the
// verdict's group the lines that are already in its read buffer when it
// has read the verdict line, as long as they keep the protocol's order
// (latch, release, then promotes and reverts); the first line that cannot
// belong (another verdict, an error, a second latch, ...) starts the next
// value. A pipe carries at most its capacity (64 KiB on Linux) per read,
// so a group larger than that, a verdict with several hundred decisions,
// can arrive as a VerdictGroup followed by its remaining *Promote and
// *Revert values on their own: nothing is lost and the order is kept, only
// the grouping is. Decisions of an `applied` event written right behind a
// verdict's group may, in turn, be read into that group. A controller acts
// on every decision the same way wherever it comes, so neither changes
// what it must do.
//
// # Back-pressure
//
// Outputs are handed over one by one: while nobody calls Next, the client
// stops reading, serve blocks writing its output and stops reading its
// input, and Send blocks once its small queue is full (until its context
// is done). No output is ever dropped. A controller that sends and reads
// from the same goroutine must read what it waits for; one that sends a
// burst should read from another goroutine.
//
// # Closing and cancelling
//
// Close queues the end of the gate's input behind every line already
// sent; serve then finishes the check in flight and every queued check
// that can still reach a verdict, writes their outputs and exits. Close
// collects those outputs (but for those a concurrent Next takes) and
// returns them with the exit's error (nil for exit 0); afterwards Next
// returns io.EOF and Send ErrClosed. Cancelling
// the context given to Start sends SIGTERM to serve (which stops at once,
// publishing nothing more) and ends the client with the context's error.
//
// # Restarts
//
// A Start-ed client whose serve process ends before Close (a crash, a
// kill, an exit) starts it again, reads and checks its hello again, and
// re-sends what the gate must know:
//
//   - the last PodsDiscovered list (if one was sent in this term);
//   - each pod's last Applied (pods terminated or no longer discovered
//     left out), by pod name;
//   - every superseded Rendered a pod still holds (the render id its last
//     Applied names, or, for a report without one, its plan's latest
//     render), and the last four others (the gate keeps as many, for a pod
//     that reports one later), oldest first, judged or not: a superseded
//     render's verdict decides the revert of the pods holding it, now or
//     when they report it, and the new gate must be able to give it again
//     (one that arrives as the gate's newest is checked at once, so a
//     verdict may repeat);
//   - the newest Rendered, last.
//
// What is re-sent is what was written to the dead gate. Lines queued and
// not yet written (or whose write failed) are not dropped: they follow,
// in order, so no event the controller sent is lost. The client mirrors
// the gate's term: LostLeadership clears what it would re-send.
//
// Then Next returns a *Restarted, before any output of the new gate. A
// restarted gate is a new term that knows nothing else: no verdicts, no
// passed or refused plans, no latch. So when Restarted.HoldRender is set,
// the controller must hold dispatch of every render until the verdict on
// HoldRender, the newest render sent, arrives (a VerdictGroup whose
// Verdict.Render is HoldRender), and from then on follow the gate as
// usual: a pass opens the way (and
// promotions may follow), a refusal latches PESSIMISTIC and brings its
// reverts. With HoldRender empty no render was known and there is nothing
// to wait for. Outputs the dead gate never wrote are not replayed; the
// re-sent events bring back the decisions that still apply, judged by the
// new gate.
//
// Restarts are bounded. The first waits Options.RestartDelay (500ms by
// default); each further one within Options.RestartWindow (10 minutes)
// waits twice as long as the one before, up to Options.RestartMaxDelay
// (30s). A restarted serve that fails to start (it exits before its hello,
// or cannot be run) counts as one more death and is tried again the same
// way. When serve dies once more after Options.MaxRestarts (5) restarts
// within the window, the client gives up: it ends with a
// *RestartLimitError (the count, the window, and how the last serve ended
// as its Cause, also through errors.Unwrap), which Next, Send and Close
// return from then on. A negative MaxRestarts turns restarts off: the
// first death ends the client that way. A new serve that says an unknown
// protocol major ends the client at once with *UnsupportedProtocolError:
// starting it again would not change its answer.
//
// A New client never restarts: the end of its reader before Close ends it
// with ErrEnded.
package rendergate
