// Package testgate is what the module's tests share: finding the real
// rendergate binary and the haproxy it judges with, and a test bus's events.
package testgate

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary is $RENDERGATE_BIN, else $CARGO_TARGET_DIR/debug/rendergate, else
// the repository's target/debug/rendergate (the repository is the first
// directory above the test's with a Cargo.toml); missing, it fails the test
// when $CI is set and skips it otherwise.
func Binary(t testing.TB) string {
	t.Helper()
	path := os.Getenv("RENDERGATE_BIN")
	if path == "" {
		if dir := os.Getenv("CARGO_TARGET_DIR"); dir != "" {
			path = filepath.Join(dir, "debug", "rendergate")
		} else {
			path = filepath.Join(repository(), "target", "debug", "rendergate")
		}
	}
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no rendergate binary at %s (set RENDERGATE_BIN): %v", path, err)
		}
		t.Skipf("no rendergate binary at %s (set RENDERGATE_BIN, or build it with cargo build -p rendergate)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// HAProxy is $RENDERGATE_TEST_HAPROXY, else haproxy on PATH, else
// /usr/sbin/haproxy.
func HAProxy() string {
	if path := os.Getenv("RENDERGATE_TEST_HAPROXY"); path != "" {
		return path
	}
	if path, err := exec.LookPath("haproxy"); err == nil {
		return path
	}
	return "/usr/sbin/haproxy"
}

// repository is the nearest directory at or above the working directory
// holding a Cargo.toml ("." when there is none).
func repository() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "Cargo.toml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// Events relays in until ctx ends, then closes what it returns: a test
// bus's Events (what the haptic component reads while its replica leads).
func Events(ctx context.Context, in <-chan any) <-chan any {
	out := make(chan any)
	go func() {
		defer close(out)
		for {
			select {
			case ev := <-in:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}
