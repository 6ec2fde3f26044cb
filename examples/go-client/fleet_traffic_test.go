// The fleet test's world around the pods: the renders a controller makes
// (N backends routed by a host map, and a variant HAProxy refuses), the
// HTTP backend they route to, and the load loop that sends requests
// through every pod and counts each one that fails.

package rendergate

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// fleetRender is plan's render: one frontend routing by Host through
// maps/hosts.map to backends be-0001...be-N of two servers each, all on the
// test's HTTP backend. Every response says which plan served it (X-Plan).
// The text is the same for every pod: a pod's listen address comes from
// its environment (RG_POD_ADDR), and `presetenv` gives the gate's check,
// whose environment is empty, a default. The map's path is relative: HAProxy
// 2.6 opens it from its working directory, the pod's live directory (the
// gate's check runs in its check directory). bad adds a line HAProxy
// refuses.
func fleetRender(plan, render string, backends int, server string, bad bool) Rendered {
	var cfg, hosts strings.Builder
	fmt.Fprintf(&cfg, `# %s: %d backends, rendered for the fleet test
global
    presetenv RG_POD_ADDR 127.0.0.1:8080

defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s

frontend www
    bind "${RG_POD_ADDR}"
    http-response set-header X-Plan %s
`, plan, backends, plan)
	if bad {
		cfg.WriteString("    http-request bogus-action\n")
	}
	cfg.WriteString("    use_backend %[req.hdr(host),lower,map(maps/hosts.map,be-default)]\n\n")
	fmt.Fprintf(&cfg, "backend be-default\n    server s1 %s\n", server)
	for i := 1; i <= backends; i++ {
		fmt.Fprintf(&cfg, "\nbackend be-%04d\n    balance roundrobin\n    server s1 %s\n    server s2 %s\n", i, server, server)
		fmt.Fprintf(&hosts, "%s be-%04d\n", fleetHost(i), i)
	}
	return Rendered{Plan: plan, Render: render, Config: cfg.String(),
		Files: []File{{Kind: "map", Path: "maps/hosts.map", Content: hosts.String()}}}
}

func fleetHost(i int) string { return fmt.Sprintf("svc-%04d.fleet.example", i) }

// startBackend serves 200 "ok" on a free loopback port until the test ends.
func startBackend(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// served is one request's outcome.
type served struct {
	start, end time.Time
	plan       string // X-Plan; "" when the request failed
	failure    string
}

// load sends requests through every pod, one loop per pod, each request on
// a new connection (so a listener that stops accepting, even briefly,
// shows as a failure rather than hiding behind a kept-alive connection).
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	log  map[string][]served // by pod
}

func startLoad(t testing.TB, pods []*pod, backends int) *load {
	l := &load{stop: make(chan struct{}), log: map[string][]served{}}
	for _, p := range pods {
		p := p
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			client := &http.Client{Timeout: 10 * time.Second,
				Transport: &http.Transport{DisableKeepAlives: true}}
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.add(p.name, request(client, p.addr, fleetHost(i%backends+1)))
				time.Sleep(time.Millisecond)
			}
		}()
	}
	t.Cleanup(l.halt)
	return l
}

func request(client *http.Client, addr, host string) served {
	s := served{start: time.Now()}
	req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
	if err != nil {
		s.failure, s.end = err.Error(), time.Now()
		return s
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		s.failure = err.Error()
		s.end = time.Now()
		return s
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	s.end = time.Now()
	switch {
	case err != nil:
		s.failure = "reading the body: " + err.Error()
	case resp.StatusCode != 200 || string(body) != "ok":
		s.failure = fmt.Sprintf("status %d, body %.80q", resp.StatusCode, body)
	default:
		s.plan = resp.Header.Get("X-Plan")
	}
	return s
}

func (l *load) add(pod string, s served) {
	l.mu.Lock()
	l.log[pod] = append(l.log[pod], s)
	l.mu.Unlock()
}

// halt stops the loops and waits for their last requests.
func (l *load) halt() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// count is how many requests through pod succeeded served by plan ("" for
// any plan).
func (l *load) count(pod, plan string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.log[pod] {
		if s.failure == "" && (plan == "" || s.plan == plan) {
			n++
		}
	}
	return n
}

// overlapping is how many successful requests through pod were in flight
// at some moment between from and to.
func (l *load) overlapping(pod string, from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.log[pod] {
		if s.failure == "" && !s.end.Before(from) && !s.start.After(to) {
			n++
		}
	}
	return n
}

// summary is every pod's totals, its failures listed (the first few).
func (l *load) summary() (total int, failures []string, plans map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	plans = map[string]int{}
	pods := make([]string, 0, len(l.log))
	for p := range l.log {
		pods = append(pods, p)
	}
	sort.Strings(pods)
	for _, p := range pods {
		for _, s := range l.log[p] {
			total++
			if s.failure != "" {
				failures = append(failures, fmt.Sprintf("%s at %s: %s", p, s.start.Format("15:04:05.000"), s.failure))
			} else {
				plans[s.plan]++
			}
		}
	}
	return total, failures, plans
}
