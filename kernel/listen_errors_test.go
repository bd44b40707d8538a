package kernel

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/sockpath"
	"github.com/sharedos/sharedos-mcp/internal/testfs"
)

// TestListenErrorsAreTyped: the command layer turns these into hints, so
// each failure is a sentinel it can test for.
func TestListenErrorsAreTyped(t *testing.T) {
	dir := shortTempDir(t)
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		want  []error
	}{
		{"a path too long to bind", func(t *testing.T) string {
			return filepath.Join(dir, strings.Repeat("x", sockpath.MaxLen()))
		}, []error{sockpath.ErrTooLong}},
		{"a regular file at the path", func(t *testing.T) string {
			p := filepath.Join(dir, "plain")
			testfs.WriteFile(t, p, "keep", 0o600)
			return p
		}, []error{ErrNotASocket}},
		{"a directory others can write", func(t *testing.T) string {
			d := filepath.Join(dir, "open")
			testfs.Mkdir(t, d, 0o777)
			return filepath.Join(d, "k.sock")
		}, []error{ErrSocketDir, sockpath.ErrUntrusted}},
		{"a directory that cannot be created", func(t *testing.T) string {
			p := filepath.Join(dir, "file")
			testfs.WriteFile(t, p, "", 0o600)
			return filepath.Join(p, "sub", "k.sock")
		}, []error{ErrSocketDir}},
		{"a socket another process answers on", func(t *testing.T) string {
			p := filepath.Join(dir, "live.sock")
			ln, err := net.Listen("unix", p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			return p
		}, []error{ErrAlreadyRunning}},
		{"a path another kernel holds the lock of", func(t *testing.T) string {
			p := filepath.Join(dir, "held.sock")
			ln, err := Listen(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			return p
		}, []error{ErrAlreadyRunning}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.setup(t)
			ln, err := Listen(p)
			if err == nil {
				ln.Close()
				t.Fatal("Listen succeeded")
			}
			for _, w := range tt.want {
				if !errors.Is(err, w) {
					t.Errorf("Listen: %v, want it to wrap %v", err, w)
				}
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "plain")); string(b) != "keep" {
		t.Error("the regular file was touched")
	}
}

// TestTheLockOutlivesAcceptingUntilClose: StopAccepting keeps the path
// this kernel's while it finishes its turns.
func TestTheLockOutlivesAcceptingUntilClose(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "k.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := ln.StopAccepting(); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(sock); !errors.Is(err, ErrAlreadyRunning) {
		t.Errorf("Listen while the first still holds the path: %v", err)
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	ln2, err := Listen(sock)
	if err != nil {
		t.Fatalf("Listen after Close: %v", err)
	}
	ln2.Close()
}
