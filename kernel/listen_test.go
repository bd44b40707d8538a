package kernel

import (
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/testfs"
)

// The tests in this file use only Listen and Close, so each can be run
// against older code.

func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// staleSocket leaves a socket file at path that nothing listens on, as a
// kernel that died leaves it.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
}

// TestOneKernelPerSocketPath starts kernels together on a stale socket,
// round after round: in every round exactly one may listen, and it must
// own the socket file that is there.
func TestOneKernelPerSocketPath(t *testing.T) {
	const rounds, kernels = 300, 4
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "k.sock")
	double := 0
	for round := range rounds {
		staleSocket(t, sock)
		type result struct {
			ln  interface{ Close() error }
			err error
		}
		results := make(chan result, kernels)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range kernels {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				ln, err := Listen(sock)
				if err != nil {
					results <- result{nil, err}
					return
				}
				results <- result{ln, nil}
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		var won []interface{ Close() error }
		for r := range results {
			if r.err == nil {
				won = append(won, r.ln)
			}
		}
		if len(won) != 1 {
			double++
			t.Errorf("round %d: %d kernels listening on one path", round, len(won))
		}
		if len(won) > 0 {
			if c, err := net.Dial("unix", sock); err != nil {
				t.Errorf("round %d: the path answers no kernel: %v", round, err)
			} else {
				c.Close()
			}
		}
		for _, ln := range won {
			ln.Close()
		}
	}
	t.Logf("%d rounds of %d concurrent starts: %d with more than one listener", rounds, kernels, double)
}

// TestAKernelRemovesOnlyItsOwnSocket: the path now belongs to another
// kernel (this one's socket was removed and another bound it); closing
// this one must leave that socket alone.
func TestAKernelRemovesOnlyItsOwnSocket(t *testing.T) {
	sock := filepath.Join(shortTempDir(t), "k.sock")
	ln, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	other, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ln.Close()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the other kernel's socket is gone: %v", err)
	}
	c.Close()

	t.Run("and does remove its own", func(t *testing.T) {
		sock := filepath.Join(shortTempDir(t), "k.sock")
		ln, err := Listen(sock)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
		if _, err := os.Lstat(sock); !os.IsNotExist(err) {
			t.Errorf("socket left behind: %v", err)
		}
	})
}

// TestListenRefusesAnotherUsersLink: a socket path through a symlink in
// a sticky directory, owned by another user who can re-point it at any
// kernel of yours, is refused.
func TestListenRefusesAnotherUsersLink(t *testing.T) {
	uid := testfs.OtherUID(t)
	base := shortTempDir(t)
	sticky := filepath.Join(base, "tmp")
	testfs.Mkdir(t, sticky, 0o777|os.ModeSticky)
	mine := filepath.Join(base, "mine")
	testfs.Mkdir(t, mine, 0o700)
	link := filepath.Join(sticky, "run")
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(link, "k.sock"))
	if err == nil {
		ln.Close()
		t.Fatal("Listen through another user's symlink succeeded")
	}
	if entries, _ := os.ReadDir(mine); len(entries) != 0 {
		t.Errorf("something was created behind the link: %v", entries)
	}
}
