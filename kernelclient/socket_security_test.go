package kernelclient

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/kproto"
)

// TestDialRefusesUntrustedSocketPaths: a socket someone else could have
// planted, or could swap, is refused before connecting, so the listener
// behind it sees no connection at all, let alone a byte.
func TestDialRefusesUntrustedSocketPaths(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown to another uid needs root")
	}
	tests := []struct {
		name string
		// setup arranges the trap around the real socket and returns the
		// path the client is told to dial.
		setup func(t *testing.T, dir, sock string) string
		want  string
	}{
		{"a socket owned by another uid", func(t *testing.T, dir, sock string) string {
			if err := os.Chown(sock, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			return sock
		}, "uid 12345"},
		{"a socket in a world-writable directory without the sticky bit", func(t *testing.T, dir, sock string) string {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return sock
		}, "writable by other users"},
		{"a socket in a group-writable directory", func(t *testing.T, dir, sock string) string {
			if err := os.Chmod(dir, 0o770); err != nil {
				t.Fatal(err)
			}
			return sock
		}, "writable by other users"},
		{"a directory owned by another uid", func(t *testing.T, dir, sock string) string {
			if err := os.Chown(dir, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			return sock
		}, "uid 12345"},
		{"a symlink to the socket", func(t *testing.T, dir, sock string) string {
			link := filepath.Join(dir, "link.sock")
			if err := os.Symlink(sock, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "symlink"},
		{"a trusted-looking directory that is a symlink into a world-writable one", func(t *testing.T, dir, sock string) string {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			other, err := os.MkdirTemp("", "kl")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(other) })
			link := filepath.Join(other, "d")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, filepath.Base(sock))
		}, "writable by other users"},
		{"a regular file where the socket should be", func(t *testing.T, dir, sock string) string {
			p := filepath.Join(dir, "file.sock")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "not a socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The socket's directory is the fake kernel's own, so the
			// trap may change its mode and owner.
			k := kerneltest.Start(t, kerneltest.Options{})
			sock := k.Path
			target := tt.setup(t, filepath.Dir(sock), sock)

			c, err := Dial(Options{Socket: target, KernelUID: -1})
			if err == nil {
				c.Close()
				t.Fatalf("Dial(%s) succeeded", target)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Dial error %q does not say %q", err, tt.want)
			}
			// Connections are accepted in order: once the kernel has
			// answered ours, it has accepted any the refused Dial made,
			// and Close waits until each has ended. One connection in
			// all means the refused client never connected.
			probe, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer probe.Close()
			if _, err := probe.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"` + kproto.MethodPing + `"}` + "\n")); err != nil {
				t.Fatal(err)
			}
			if line, err := bufio.NewReader(probe).ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
				t.Fatalf("the kernel answered the probe %q (%v)", line, err)
			}
			probe.Close()
			k.Close()
			if ev := k.Events(); !slices.Equal(ev, []string{"closed"}) {
				t.Errorf("the kernel saw %q, want only the probe's connection: the refused client connected", ev)
			}
		})
	}
}
