// A pod of the fleet test: one real haproxy in master-worker mode in a
// directory of its own, and the agent beside it that writes a render into
// that directory, reloads HAProxy, keeps the rollback baseline and reports
// what it holds, as a HAPTIC pod's agent does.
//
// Reloads go through the master CLI's `reload` command, not `-sf`. A
// HAPTIC pod runs HAProxy in master-worker mode beside a process that
// deploys the config (the HAProxy Data Plane API in its early versions, an
// agent of its own since), and a deployer given the master socket reloads
// through it: the master keeps the listening sockets and hands them to
// each new worker, so a reload never closes them. `-sf` instead starts a
// separate process per reload that takes the sockets over from the old
// one, the older daemon model. With a config HAProxy refuses, the master
// keeps its current worker (and that worker's config) running and counts
// the reload as failed in `show proc`, which is how the agent learns that
// its HAProxy did not load the plan.

package rendergate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pod is one HAProxy and its agent. live/ holds the files HAProxy loads,
// baseline/ the rollback copy; the master CLI socket, the pid file and
// HAProxy's log sit beside them, outside both.
type pod struct {
	name    string
	dir     string
	addr    string // the frontend's address, 127.0.0.1:port
	haproxy string
	cmd     *exec.Cmd
	log     *os.File

	mu    sync.Mutex
	state Applied // what the pod holds, runs and rolls back to
	// baselineRender is the render id of baseline/.
	baselineRender string
	// failedReloads counts reloads its HAProxy refused.
	failedReloads int
}

func (p *pod) live() string     { return filepath.Join(p.dir, "live") }
func (p *pod) baseline() string { return filepath.Join(p.dir, "baseline") }
func (p *pod) socket() string   { return filepath.Join(p.dir, "master.sock") }

// renderFiles is what a pod writes for r: haproxy.cfg and r's files, by
// path under live/.
func renderFiles(r Rendered) map[string][]byte {
	files := map[string][]byte{"haproxy.cfg": []byte(r.Config)}
	for _, f := range r.Files {
		files[filepath.Clean(f.Path)] = []byte(f.Content)
	}
	return files
}

// startPod lays out r as the pod's live files and its baseline, starts its
// HAProxy and waits until the frontend accepts connections. The process
// group is killed when the test ends, passed or not.
func startPod(t testing.TB, haproxy, dir, name string, r Rendered) *pod {
	t.Helper()
	p := &pod{name: name, dir: dir, haproxy: haproxy,
		state:          Applied{Pod: name, Render: r.Render, Plan: r.Plan, RunningPlan: r.Plan, BaselinePlan: r.Plan},
		baselineRender: r.Render}
	if err := writeTree(p.live(), renderFiles(r)); err != nil {
		t.Fatal(err)
	}
	if err := copyTree(p.live(), p.baseline()); err != nil {
		t.Fatal(err)
	}
	// A free port can be taken by someone else between the probe and
	// HAProxy's bind: try a few.
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = p.start(); err == nil {
			t.Cleanup(p.stop)
			return p
		}
		p.stop()
	}
	t.Fatalf("pod %s: %v\n%s", name, err, p.logTail())
	return nil
}

func (p *pod) start() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	p.addr = fmt.Sprintf("127.0.0.1:%d", port)
	os.Remove(p.socket())
	if p.log, err = os.Create(filepath.Join(p.dir, "haproxy.log")); err != nil {
		return err
	}
	// Foreground master (-W without -D): it stays the test's child, in a
	// process group of its own with its workers, so stop can kill them all.
	// Pdeathsig ends it with the test process even when the test binary is
	// killed before its cleanups run; the workers exit with their master.
	p.cmd = exec.Command(p.haproxy, "-W", "-S", p.socket(), "-f", filepath.Join(p.live(), "haproxy.cfg"),
		"-p", filepath.Join(p.dir, "haproxy.pid"))
	p.cmd.Dir = p.live() // the render's relative paths (its map) are read from here
	p.cmd.Env = append(os.Environ(), "RG_POD_ADDR="+p.addr)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			p.cmd = nil
			return fmt.Errorf("haproxy exited at start: %v", err)
		default:
		}
		if proc, err := p.showProc(); err == nil && len(proc.workers) > 0 {
			if conn, err := net.DialTimeout("tcp", p.addr, time.Second); err == nil {
				conn.Close()
				return nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("haproxy did not come up on %s within 30s", p.addr)
}

// stop kills the pod's whole process group (master and workers).
func (p *pod) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		p.cmd = nil
	}
	if p.log != nil {
		p.log.Close()
		p.log = nil
	}
}

func (p *pod) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "haproxy.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cli sends one command to the master CLI and returns its answer.
func (p *pod) cli(command string) (string, error) {
	conn, err := net.DialTimeout("unix", p.socket(), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, command+"\n"); err != nil {
		return "", err
	}
	// The master answers one command and closes when our side is done.
	conn.(*net.UnixConn).CloseWrite()
	out, err := io.ReadAll(conn)
	return string(out), err
}

// procs is `show proc` read: the master's reload and failed-reload counts
// and the current workers' pids (old workers left out).
type procs struct {
	reloads, failed int
	workers         []int
}

var masterLine = regexp.MustCompile(`^\d+\s+master\s+(\d+)\s+\[failed:\s*(\d+)\]`)

func (p *pod) showProc() (procs, error) {
	out, err := p.cli("show proc")
	if err != nil {
		return procs{}, err
	}
	var pr procs
	master, section := false, ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "#") {
			section = strings.TrimSpace(strings.TrimPrefix(line, "#"))
			continue
		}
		if m := masterLine.FindStringSubmatch(line); m != nil {
			pr.reloads, _ = strconv.Atoi(m[1])
			pr.failed, _ = strconv.Atoi(m[2])
			master = true
			continue
		}
		fields := strings.Fields(line)
		if section == "workers" && len(fields) > 1 && fields[1] == "worker" {
			pid, _ := strconv.Atoi(fields[0])
			pr.workers = append(pr.workers, pid)
		}
	}
	if !master {
		return procs{}, fmt.Errorf("no master line in `show proc`: %q", out)
	}
	return pr, nil
}

// reload asks the master to reload the files in live/ and says whether a
// new worker now runs them (true) or HAProxy refused them, its current
// worker running on (false).
func (p *pod) reload() (bool, error) {
	before, err := p.showProc()
	if err != nil {
		return false, err
	}
	// In 2.6 `reload` answers nothing (3.x answers Success=0/1): the
	// outcome is read from `show proc`, once the master counts the reload.
	if _, err := p.cli("reload"); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("reload: %w", err)
	}
	old := map[int]bool{}
	for _, w := range before.workers {
		old[w] = true
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		// While the master re-executes itself the CLI may not answer.
		if now, err := p.showProc(); err == nil && now.reloads > before.reloads {
			for _, w := range now.workers {
				if !old[w] {
					return true, nil
				}
			}
			// [failed: N] counts every failed reload since start: only a
			// rise says this one was refused.
			if now.failed > before.failed {
				return false, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false, fmt.Errorf("pod %s: reload not finished after 60s\n%s", p.name, p.logTail())
}

// apply writes r into live/ and reloads: the pod then holds r, and runs it
// if its HAProxy took it.
func (p *pod) apply(r Rendered) (Applied, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := writeTree(p.live(), renderFiles(r)); err != nil {
		return Applied{}, false, err
	}
	loaded, err := p.reload()
	if err != nil {
		return Applied{}, false, err
	}
	p.state.Render, p.state.Plan = r.Render, r.Plan
	if loaded {
		p.state.RunningPlan = r.Plan
	} else {
		p.failedReloads++
	}
	return p.state, loaded, nil
}

// promote makes live/ the baseline when the pod still holds plan.
func (p *pod) promote(plan string) (Applied, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Plan != plan {
		return p.state, false, nil
	}
	if err := copyTree(p.live(), p.baseline()); err != nil {
		return Applied{}, false, err
	}
	p.state.BaselinePlan, p.baselineRender = plan, p.state.Render
	return p.state, true, nil
}

// revert puts the baseline back into live/ when the pod still holds plan,
// and reloads so that HAProxy runs what the files say.
func (p *pod) revert(plan, to string) (Applied, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state.Plan != plan {
		return p.state, false, nil
	}
	if to != "baseline" {
		return Applied{}, false, fmt.Errorf("revert of %s to %q: this agent keeps only its baseline", p.name, to)
	}
	if err := copyTree(p.baseline(), p.live()); err != nil {
		return Applied{}, false, err
	}
	loaded, err := p.reload()
	if err != nil {
		return Applied{}, false, err
	}
	if !loaded {
		return Applied{}, false, fmt.Errorf("pod %s: HAProxy refused its own baseline\n%s", p.name, p.logTail())
	}
	p.state.Render, p.state.Plan, p.state.RunningPlan = p.baselineRender, p.state.BaselinePlan, p.state.BaselinePlan
	return p.state, true, nil
}

func (p *pod) report() Applied {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// liveFiles and baselineFiles read the two trees, by path.
func (p *pod) liveFiles() (map[string][]byte, error)     { return readTree(p.live()) }
func (p *pod) baselineFiles() (map[string][]byte, error) { return readTree(p.baseline()) }

// writeTree makes dir hold exactly files: each written whole, and files
// not in the set removed.
func writeTree(dir string, files map[string][]byte) error {
	have, err := readTree(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for path := range have {
		if _, keep := files[path]; !keep {
			if err := os.Remove(filepath.Join(dir, path)); err != nil {
				return err
			}
		}
	}
	for path, content := range files {
		full := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyTree(from, to string) error {
	files, err := readTree(from)
	if err != nil {
		return err
	}
	return writeTree(to, files)
}

func readTree(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files[rel] = content
		return err
	})
	return files, err
}

// sameTree says where two trees differ; "" when byte-equal.
func sameTree(got, want map[string][]byte) string {
	var diffs []string
	for path, content := range want {
		if g, ok := got[path]; !ok {
			diffs = append(diffs, path+" missing")
		} else if !bytes.Equal(g, content) {
			diffs = append(diffs, path+" differs")
		}
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			diffs = append(diffs, path+" extra")
		}
	}
	return strings.Join(diffs, ", ")
}
