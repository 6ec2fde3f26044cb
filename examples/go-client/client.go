// The client: one `serve` process (or any reader/writer pair) behind Send
// and Next, restarted with its state re-sent when it dies (see doc.go).

package rendergate

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Options says how Start runs `serve`.
type Options struct {
	// Binary is the rendergate executable; "rendergate" (looked up on
	// PATH) when empty.
	Binary string
	// Args come after `serve`, e.g. {"--haproxy", "/usr/sbin/haproxy",
	// "--start-held"}.
	Args []string
	// Stderr receives serve's logs; nil discards them.
	Stderr io.Writer
	// RestartDelay is how long the client waits after serve died before
	// starting it again; each further restart within RestartWindow waits
	// twice as long as the one before, up to RestartMaxDelay. 500ms when
	// zero.
	RestartDelay time.Duration
	// RestartMaxDelay caps that backoff; 30s when zero.
	RestartMaxDelay time.Duration
	// MaxRestarts is how many restarts the client makes within
	// RestartWindow: when serve dies (or a restarted serve fails to start)
	// once more, the client gives up and ends with a *RestartLimitError.
	// 5 when zero; negative means never restart.
	MaxRestarts int
	// RestartWindow is how far back restarts count; 10 minutes when zero.
	RestartWindow time.Duration
}

// RestartLimitError ends a client whose serve kept dying: it died again
// after Restarts restarts within Window (Options.MaxRestarts).
type RestartLimitError struct {
	Restarts int
	Window   time.Duration
	// Cause is how the last serve ended, or why the last start failed.
	Cause error
}

func (e *RestartLimitError) Error() string {
	if e.Restarts == 0 {
		return fmt.Sprintf("rendergate: serve died and restarts are off (MaxRestarts < 0): %v", e.Cause)
	}
	return fmt.Sprintf("rendergate: serve died again after %d restarts within %s; not restarting it: %v",
		e.Restarts, e.Window, e.Cause)
}

func (e *RestartLimitError) Unwrap() error { return e.Cause }

// UnsupportedProtocolError refuses a gate whose protocol major this
// package does not know.
type UnsupportedProtocolError struct {
	Hello Hello
}

func (e *UnsupportedProtocolError) Error() string {
	return fmt.Sprintf("rendergate: serve speaks protocol %d (version %s); this client knows protocol %d",
		e.Hello.Protocol, e.Hello.Version, ProtocolMajor)
}

// ProtocolMajor is the protocol major this package speaks.
const ProtocolMajor = 1

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("rendergate: client closed")

// ErrEnded is the end of a stream that was not closed by Close: the
// reader of a New client reached its end.
var ErrEnded = errors.New("rendergate: serve's output ended before Close")

// queueSize bounds the lines waiting for the writer; a full queue blocks
// Send (back-pressure from a gate that is not reading).
const queueSize = 64

// Client talks to one gate. Its methods are safe for concurrent use.
type Client struct {
	opts   *Options // nil for New: no process, no restart
	ctx    context.Context
	cancel context.CancelFunc

	out  chan Output
	done chan struct{} // closed once out is closed and err set
	err  error         // why the stream ended; nil for a clean Close

	// sendLock orders Send's enqueues with Close's end of input. It is a
	// channel, not a mutex: whoever waits for it (a Send behind one blocked
	// on a full queue) still honours its own context.
	sendLock chan struct{}
	// state is what the gate was told, recorded as each line is written
	// (only the writer touches it): a restarted gate is told it again.
	state state
	queue chan queued
	// sessions wakes the writer when a restart made a new session.
	sessions chan struct{}
	// sent are the last renders Send queued, the newest last (guarded by
	// smu): the newest is what a restarted gate's latch is held for, and
	// the one before it takes its place when the gate refuses its line.
	sent []Rendered
	// closed is closed by the first Close: a restart waiting out its
	// backoff stops there rather than start a gate only to close it.
	closed chan struct{}
	// refused are the render ids whose lines the gate refused, for the
	// writer to forget before it tells a restarted gate what it knows
	// (guarded by smu).
	refused []string

	// smu guards the current session, its hello and closing; it is never
	// held while waiting for anything.
	smu     sync.Mutex
	sess    *session
	hello   Hello
	closing bool
	// restarting: serve ended and a new one is being started (guarded by smu)
	restarting bool

	// restarts are the times of the restarts within Options.RestartWindow
	// (only the reading goroutine touches them).
	restarts []time.Time
}

// A session is one gate: a process (or New's pair) and its generation.
type session struct {
	gen    int
	cmd    *exec.Cmd // nil for New
	stdin  io.Writer
	lines  *bufio.Reader
	stderr *lineEnd // nil: discarded

	// written counts the lines written to stdin, and renders are the
	// recent rendered events among them by line number: an error line
	// names its input line by number (the writer writes them, the reader
	// reads them).
	mu      sync.Mutex
	written uint64
	renders map[uint64]Rendered
}

// sentKept is how many of the last renders sent the client remembers in
// order, for a refused line to give the newest back to the one before it.
const sentKept = 8

// renderLines bounds how far back an error line is matched to its render:
// far more lines than serve's input pipe and the client's queue hold
// between a line written and its error read.
const renderLines = 1 << 14

// wrote counts one line written, carrying ev.
func (s *session) wrote(ev Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written++
	if r, ok := asRendered(ev); ok {
		if s.renders == nil {
			s.renders = map[uint64]Rendered{}
		}
		s.renders[s.written] = r
		if len(s.renders) > 2*renderLines {
			for line := range s.renders {
				if line+renderLines < s.written {
					delete(s.renders, line)
				}
			}
		}
	}
}

// renderAt is the render written as input line n, if it was one.
func (s *session) renderAt(n uint64) *Rendered {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.renders[n]; ok {
		return &r
	}
	return nil
}

// queued is one line for the writer and the event it carries; a nil line
// closes the gate's input.
type queued struct {
	line []byte
	ev   Event
}

// Start runs `Binary serve Args...`, reads its hello and checks the
// protocol major. Cancelling ctx stops the gate (SIGTERM) and ends the
// client with ctx's error.
func Start(ctx context.Context, opts Options) (*Client, error) {
	if opts.Binary == "" {
		opts.Binary = "rendergate"
	}
	if opts.RestartDelay == 0 {
		opts.RestartDelay = 500 * time.Millisecond
	}
	if opts.RestartMaxDelay == 0 {
		opts.RestartMaxDelay = 30 * time.Second
	}
	if opts.MaxRestarts == 0 {
		opts.MaxRestarts = 5
	}
	if opts.RestartWindow == 0 {
		opts.RestartWindow = 10 * time.Minute
	}
	c := newClient(ctx, &opts)
	s, hello, err := c.spawn(1)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.begin(s, hello)
	go func() {
		select {
		case <-c.ctx.Done():
			c.current().terminate()
		case <-c.done:
		}
	}()
	return c, nil
}

// New wraps a gate reachable through a reader (its output) and a writer
// (its input), reads its hello and checks the protocol major. Close closes
// w when it is an io.Closer. A New client never restarts anything.
func New(r io.Reader, w io.Writer) (*Client, error) {
	c := newClient(context.Background(), nil)
	s := &session{gen: 1, stdin: w, lines: bufio.NewReaderSize(r, 1<<20)}
	hello, err := readHello(s.lines)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.begin(s, hello)
	return c, nil
}

func newClient(ctx context.Context, opts *Options) *Client {
	ctx, cancel := context.WithCancel(ctx)
	return &Client{
		opts:     opts,
		ctx:      ctx,
		cancel:   cancel,
		out:      make(chan Output),
		done:     make(chan struct{}),
		closed:   make(chan struct{}),
		queue:    make(chan queued, queueSize),
		state:    newState(),
		sendLock: make(chan struct{}, 1),
		sessions: make(chan struct{}, 1),
	}
}

// lockSend takes the send lock, unless ctx is done or the client ended first.
func (c *Client) lockSend(ctx context.Context) error {
	select {
	case c.sendLock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.end()
	}
}

func (c *Client) unlockSend() { <-c.sendLock }

func (c *Client) isClosing() bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.closing
}

func (c *Client) begin(s *session, hello Hello) {
	c.sess, c.hello = s, hello
	go c.read(s)
	go c.write()
}

// Hello is the current gate's hello (a restarted gate's after a restart).
func (c *Client) Hello() Hello {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.hello
}

// Restarting tells whether serve ended and the client is starting another
// (waiting out the backoff, or waiting for the new one's hello).
func (c *Client) Restarting() bool {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.restarting
}

// Pid is the current serve process's id; 0 for a New client.
func (c *Client) Pid() int {
	s := c.current()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (c *Client) current() *session {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.sess
}

// Send queues ev's line for the gate and records what a restarted gate
// must be told again. It returns once the line is queued, not once it is
// written: nil means the line waits in the client's queue (at most 64
// lines, behind the one being written) to be written to serve's stdin in
// order, not that serve has read it, nor even that it reached the pipe.
// The gate's outputs are its only acknowledgement (a verdict for a
// rendered event, an error line for a line it refused), and Close
// returns only after every queued line was written. Send blocks while the
// queue is full (the gate is not reading, usually because nobody reads its
// outputs) until ctx is done. A line queued for a gate that dies before it
// is written is written to the restarted gate, after what it must know is
// re-sent. After the client ended, Send returns why (ErrClosed after
// Close).
func (c *Client) Send(ctx context.Context, ev Event) error {
	line, err := Marshal(ev)
	if err != nil {
		return err
	}
	if c.isClosing() {
		return ErrClosed
	}
	if err := c.lockSend(ctx); err != nil {
		return err
	}
	defer c.unlockSend()
	if c.isClosing() {
		return ErrClosed
	}
	select {
	case <-c.done:
		return c.end()
	default:
	}
	select {
	case c.queue <- queued{line: append(line, '\n'), ev: ev}:
		c.smu.Lock()
		if r, ok := asRendered(ev); ok {
			c.sent = append(c.sent, r)
			if len(c.sent) > sentKept {
				c.sent = append([]Rendered{}, c.sent[len(c.sent)-sentKept:]...)
			}
		} else if ev.EventType() == (LostLeadership{}).EventType() {
			c.sent = nil // a new term knows no render
		}
		c.smu.Unlock()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return c.end()
	}
}

// Next returns the next output, blocking until one comes or ctx is done.
// After the stream ended it returns io.EOF (a clean Close) or why it
// ended.
func (c *Client) Next(ctx context.Context) (Output, error) {
	select {
	case o, ok := <-c.out:
		if !ok {
			return nil, c.end()
		}
		return o, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Client) end() error {
	<-c.done
	if c.err == nil {
		return io.EOF
	}
	return c.err
}

// Close closes the gate's input once every line sent before it is
// written, then collects every output still to come until the gate has
// drained and exited, and returns them: outputs are never dropped (those a
// concurrent Next takes are its, not in the slice). The error is why the
// stream ended (nil when serve exited 0), or ctx's.
func (c *Client) Close(ctx context.Context) ([]Output, error) {
	c.smu.Lock()
	first := !c.closing
	c.closing = true
	c.smu.Unlock()
	if first {
		close(c.closed)
		// The queue may be full behind a gate waiting for its outputs to
		// be read, and a Send may hold the send lock while it waits: queue
		// the end, after every line a Send queued, while this goroutine
		// reads the outputs.
		go func() {
			if c.lockSend(context.Background()) != nil {
				return
			}
			defer c.unlockSend()
			select {
			case c.queue <- queued{}:
			case <-c.done:
			}
		}()
	}
	var rest []Output
	for {
		select {
		case o, ok := <-c.out:
			if !ok {
				return rest, c.err
			}
			rest = append(rest, o)
		case <-ctx.Done():
			return rest, ctx.Err()
		}
	}
}

// write writes queued lines to the current gate, in order, recording what
// each told it. When a restart made a new session, it first tells the new
// gate what the dead one knew (state.replay), then goes on with the lines
// still queued: none is dropped. A line whose write failed (the gate died)
// waits for the next gate.
func (c *Client) write() {
	s := c.current()
	var pending *queued
	for {
		if pending == nil {
			select {
			case q := <-c.queue:
				pending = &q
			case <-c.sessions:
			case <-c.done:
				return
			}
		}
		if now := c.current(); now.gen != s.gen {
			s = now
			c.smu.Lock()
			refused := c.refused
			c.refused = nil
			c.smu.Unlock()
			for _, render := range refused {
				c.state.forget(render)
			}
			for _, ev := range c.state.replay() {
				line, err := Marshal(ev)
				if err == nil {
					s.wrote(ev) // before the write, as below
					s.stdin.Write(append(line, '\n'))
				}
			}
		}
		if pending == nil {
			continue
		}
		if pending.line == nil {
			if closer, ok := s.stdin.(io.Closer); ok {
				closer.Close()
			}
			pending = nil
			continue
		}
		s.wrote(pending.ev) // before the write: the gate may answer before Write returns
		if _, err := s.stdin.Write(pending.line); err != nil {
			// the gate is gone: its reader restarts it (or ends the client)
			for c.current().gen == s.gen {
				select {
				case <-c.sessions:
				case <-c.done:
					return
				}
			}
			continue
		}
		c.state.record(pending.ev)
		pending = nil
	}
}

// read delivers every output of the gate, and restarts a Start-ed gate
// that ends before Close.
func (c *Client) read(s *session) {
	for {
		err := c.pump(s)
		if err != nil && !errors.Is(err, io.EOF) {
			s.terminate()
		}
		exit := s.wait()
		if err == nil || errors.Is(err, io.EOF) {
			err = exit
		}
		closing := c.isClosing()
		switch {
		case c.ctx.Err() != nil:
			c.finish(c.ctx.Err())
			return
		case closing:
			c.finish(err)
			return
		case c.opts == nil:
			if err == nil {
				err = ErrEnded
			}
			c.finish(err)
			return
		}
		c.smu.Lock()
		c.restarting = true
		c.smu.Unlock()
		next, restarted, rerr := c.restart(s, err)
		c.smu.Lock()
		c.restarting = false
		c.smu.Unlock()
		if rerr != nil {
			c.finish(rerr)
			return
		}
		// When cancelled, the next turn ends the client with next's exit.
		c.deliver(restarted)
		s = next
	}
}

func (c *Client) finish(err error) {
	c.err = err
	c.cancel()
	close(c.out)
	close(c.done)
}

func (c *Client) deliver(o Output) bool {
	select {
	case c.out <- o:
		return true
	case <-c.ctx.Done():
		return false
	}
}

// pump reads s's lines until its end and delivers them as outputs. A
// verdict takes with it the group lines already buffered behind it (see
// doc.go, "Verdict groups").
func (c *Client) pump(s *session) error {
	var pending []byte
	for {
		line := pending
		pending = nil
		if line == nil {
			var err error
			if line, err = readLine(s.lines); err != nil {
				return err
			}
		}
		out, verdict, err := parseLine(line)
		if err != nil {
			return err
		}
		if verdict != nil {
			group := &VerdictGroup{Verdict: *verdict}
			out = group
			last := 0
			for s.lines.Buffered() > 0 {
				next, err := readLine(s.lines)
				if err != nil {
					c.deliver(group)
					return err
				}
				o, v, err := parseLine(next)
				if err != nil {
					c.deliver(group)
					return err
				}
				if v == nil && o == nil {
					continue // unknown type
				}
				joined := false
				if v == nil {
					last, joined = group.join(o, last)
				}
				if !joined {
					pending = next
					break
				}
			}
		}
		if out == nil {
			continue
		}
		if e, ok := out.(*InputError); ok {
			c.refusedLine(s, e)
		}
		if !c.deliver(out) {
			return c.ctx.Err()
		}
	}
}

// refusedLine names in e the render whose line the gate refused, if it was
// one, and makes sure no restarted gate is told it: the newest render a
// restart holds the latch for is the one before it.
func (c *Client) refusedLine(s *session, e *InputError) {
	e.Rendered = s.renderAt(e.Line)
	if e.Rendered == nil {
		return
	}
	c.smu.Lock()
	defer c.smu.Unlock()
	c.refused = append(c.refused, e.Rendered.Render)
	for i := len(c.sent) - 1; i >= 0; i-- {
		if c.sent[i].Render == e.Rendered.Render {
			c.sent = append(c.sent[:i], c.sent[i+1:]...)
			break
		}
	}
}

// readLine returns the next non-blank line, without its end.
func readLine(r *bufio.Reader) ([]byte, error) {
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) > 0 {
			return line, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readHello reads the first line and checks it is a hello in a protocol
// major this package knows.
func readHello(r *bufio.Reader) (Hello, error) {
	line, err := readLine(r)
	if err != nil {
		return Hello{}, fmt.Errorf("rendergate: no hello from serve: %w", err)
	}
	var h struct {
		Type string `json:"type"`
		Hello
	}
	if err := json.Unmarshal(line, &h); err != nil || h.Type != "hello" {
		return Hello{}, fmt.Errorf("rendergate: serve's first line is not a hello: %.200q", line)
	}
	if h.Protocol != ProtocolMajor {
		return Hello{}, &UnsupportedProtocolError{Hello: h.Hello}
	}
	return h.Hello, nil
}

// spawn starts serve as generation gen and reads its hello.
func (c *Client) spawn(gen int) (*session, Hello, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, Hello{}, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, Hello{}, err
	}
	cmd := exec.Command(c.opts.Binary, append([]string{"serve"}, c.opts.Args...)...)
	cmd.Stdin = inR
	var stderr *lineEnd
	if c.opts.Stderr != nil {
		stderr = &lineEnd{w: c.opts.Stderr}
		cmd.Stderr = stderr
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, Hello{}, err
	}
	err = cmd.Start()
	inR.Close()
	if err != nil {
		inW.Close()
		return nil, Hello{}, fmt.Errorf("rendergate: start %s: %w", c.opts.Binary, err)
	}
	s := &session{gen: gen, cmd: cmd, stdin: inW, lines: bufio.NewReaderSize(stdout, 1<<20), stderr: stderr}
	type result struct {
		hello Hello
		err   error
	}
	got := make(chan result, 1)
	go func() {
		h, err := readHello(s.lines)
		got <- result{h, err}
	}()
	var r result
	select {
	case r = <-got:
	case <-c.ctx.Done():
		r.err = c.ctx.Err()
	}
	if r.err != nil {
		s.terminate()
		inW.Close()
		s.wait()
		return nil, Hello{}, r.err
	}
	return s, r.hello, nil
}

// restart starts a new gate after old ended with cause, re-sends what the
// gate must know, and returns the value that tells the controller so. A
// start that fails counts as one more death, and is tried again after the
// backoff, until the restart limit; a gate with an unknown protocol major
// is not tried again.
func (c *Client) restart(old *session, cause error) (*session, *Restarted, error) {
	var s *session
	var hello Hello
	for {
		delay, err := c.nextRestart(time.Now(), cause)
		if err != nil {
			return nil, nil, err
		}
		select {
		case <-time.After(delay):
		case <-c.ctx.Done():
			return nil, nil, c.ctx.Err()
		case <-c.closed:
			// Closed while serve was down: the stream ends with why it died.
			return nil, nil, cause
		}
		if s, hello, err = c.spawn(old.gen + 1); err == nil {
			break
		}
		closing := c.isClosing()
		var unsupported *UnsupportedProtocolError
		if errors.As(err, &unsupported) || c.ctx.Err() != nil || closing {
			return nil, nil, err
		}
		cause = err
	}
	c.smu.Lock()
	c.sess, c.hello = s, hello
	if c.ctx.Err() != nil {
		// cancelled after Start's watcher looked at the old session
		s.terminate()
	}
	closing := c.closing
	var newest *Rendered
	if n := len(c.sent); n > 0 {
		last := c.sent[n-1]
		newest = &last
	}
	c.smu.Unlock()
	restarted := &Restarted{Hello: hello, Cause: cause}
	if newest != nil {
		restarted.HoldPlan, restarted.HoldRender = newest.Plan, newest.Render
	}
	// the writer tells the new gate what the dead one knew, then goes on
	select {
	case c.sessions <- struct{}{}:
	default:
	}
	if closing {
		// Close came while serve was down: its end is for this gate too.
		go func() {
			if c.lockSend(context.Background()) != nil {
				return
			}
			defer c.unlockSend()
			select {
			case c.queue <- queued{}:
			case <-c.done:
			}
		}()
	}
	return s, restarted, nil
}

// nextRestart counts one more restart at now and says how long to wait
// before it: RestartDelay doubled for each restart already within
// RestartWindow, at most RestartMaxDelay. Past MaxRestarts within the
// window it gives up instead.
func (c *Client) nextRestart(now time.Time, cause error) (time.Duration, error) {
	o := c.opts
	recent := c.restarts[:0]
	for _, at := range c.restarts {
		if now.Sub(at) < o.RestartWindow {
			recent = append(recent, at)
		}
	}
	c.restarts = recent
	if o.MaxRestarts < 0 || len(recent) >= o.MaxRestarts {
		return 0, &RestartLimitError{Restarts: len(recent), Window: o.RestartWindow, Cause: cause}
	}
	delay := o.RestartDelay
	for i := 0; i < len(recent) && delay < o.RestartMaxDelay; i++ {
		delay *= 2
	}
	if delay > o.RestartMaxDelay {
		delay = o.RestartMaxDelay
	}
	c.restarts = append(c.restarts, now)
	return delay, nil
}

func (s *session) terminate() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// wait waits for the process's exit; nil for New's pair.
func (s *session) wait() error {
	if s.cmd == nil {
		return nil
	}
	if closer, ok := s.stdin.(io.Closer); ok {
		closer.Close()
	}
	err := s.cmd.Wait() // also waits for the stderr copy
	if s.stderr != nil {
		s.stderr.end()
	}
	return err
}

// lineEnd passes one serve's stderr on and, once it ended, ends a last
// line the process did not (killed mid-write), so that the next serve's
// first line is not glued to it.
type lineEnd struct {
	w    io.Writer
	last byte
}

func (l *lineEnd) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.last = p[len(p)-1]
	}
	return l.w.Write(p)
}

func (l *lineEnd) end() {
	if l.last != 0 && l.last != '\n' {
		l.w.Write([]byte{'\n'})
	}
}

// state mirrors what the gate knows and a restarted gate must be told
// again: the pods, each pod's last applied, the newest render and every
// superseded render a pod still holds (its verdict decides that pod's
// revert). It is reset with the gate's term on LostLeadership.
type state struct {
	discovered []string // nil: no pods_discovered since the term began
	applied    map[string]Applied
	newest     *Rendered
	// held are the superseded renders a restarted gate must know, oldest
	// first: those some pod's last applied names (by render id, or, for a
	// report without one, the plan's latest render), and the last
	// supersededKept of the rest, as the gate keeps them (a pod may report
	// one later; the gate checks it only then).
	held []Rendered
}

func newState() state {
	return state{applied: map[string]Applied{}}
}

// asRendered is ev as a Rendered value, if it is one.
func asRendered(ev Event) (Rendered, bool) {
	switch e := ev.(type) {
	case Rendered:
		return e, true
	case *Rendered:
		return *e, true
	}
	return Rendered{}, false
}

func (st *state) record(ev Event) {
	switch e := ev.(type) {
	case *Rendered:
		st.record(*e)
	case *Applied:
		st.record(*e)
	case *PodTerminated:
		st.record(*e)
	case *PodsDiscovered:
		st.record(*e)
	case *LostLeadership:
		st.record(*e)
	case Rendered:
		if st.newest != nil {
			st.held = append(st.held, *st.newest)
		}
		st.newest = &e
		st.prune()
	case Applied:
		st.applied[e.Pod] = e
		st.prune()
	case PodTerminated:
		delete(st.applied, e.Pod)
		st.prune()
		if st.discovered != nil {
			kept := []string{}
			for _, p := range st.discovered {
				if p != e.Pod {
					kept = append(kept, p)
				}
			}
			st.discovered = kept
		}
	case PodsDiscovered:
		listed := map[string]bool{}
		for _, p := range e.Pods {
			listed[p] = true
		}
		for p := range st.applied {
			if !listed[p] {
				delete(st.applied, p)
			}
		}
		st.discovered = append([]string{}, e.Pods...)
		st.prune()
	case LostLeadership:
		*st = newState()
	}
}

// forget takes back a render whose line the gate refused: the gate never
// knew it, so the render before it is the newest again.
func (st *state) forget(render string) {
	if st.newest != nil && st.newest.Render == render {
		st.newest = nil
		if n := len(st.held); n > 0 {
			before := st.held[n-1]
			st.newest, st.held = &before, st.held[:n-1]
		}
		return
	}
	for i := len(st.held) - 1; i >= 0; i-- {
		if st.held[i].Render == render {
			st.held = append(st.held[:i], st.held[i+1:]...)
			return
		}
	}
}

// supersededKept is how many superseded renders no pod holds the gate
// keeps (docs/behaviour.md, "Which renders get checked").
const supersededKept = 4

// prune keeps of the superseded renders those a pod holds (the last
// occurrence of each render id a report names, and the latest render of
// each plan a report without a render id names) and the last
// supersededKept others; never one with the newest's id.
func (st *state) prune() {
	ids, plans := st.holders()
	kept := []Rendered{}
	seenID, seenPlan := map[string]bool{}, map[string]bool{}
	others := 0
	if st.newest != nil {
		seenID[st.newest.Render] = true
		seenPlan[st.newest.Plan] = true
	}
	// newest first, so that each id and plan keeps its latest occurrence
	for i := len(st.held) - 1; i >= 0; i-- {
		r := st.held[i]
		latest := !seenID[r.Render]
		byID := ids[r.Render] && latest
		byPlan := plans[r.Plan] && !seenPlan[r.Plan]
		seenID[r.Render], seenPlan[r.Plan] = true, true
		if byID || byPlan {
			kept = append(kept, r)
		} else if latest && others < supersededKept {
			others++
			kept = append(kept, r)
		}
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	st.held = kept
}

// holders are the render ids the pods' last reports name, and the plans
// of reports that name none.
func (st *state) holders() (ids, plans map[string]bool) {
	ids, plans = map[string]bool{}, map[string]bool{}
	for _, a := range st.applied {
		if a.Render != "" {
			ids[a.Render] = true
		} else {
			plans[a.Plan] = true
		}
	}
	return ids, plans
}

// replay is the events that tell a fresh gate what this one knew: the
// pods discovered, each pod's last applied (by pod name), the superseded
// renders kept (oldest first), the newest render last. A superseded
// render is re-sent even when the dead gate judged it: a pod that reports
// it later is reverted by its verdict, which the new gate must give again
// (it checks a superseded render only once a pod reports it, but one that
// arrives as the newest at once: a verdict may repeat).
func (st *state) replay() []Event {
	var events []Event
	if st.discovered != nil {
		events = append(events, PodsDiscovered{Pods: st.discovered})
	}
	pods := make([]string, 0, len(st.applied))
	for p := range st.applied {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	for _, p := range pods {
		events = append(events, st.applied[p])
	}
	for _, r := range st.held {
		events = append(events, r)
	}
	if st.newest != nil {
		events = append(events, *st.newest)
	}
	return events
}
