package sockpath

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func ownUIDOrRoot(uid uint32) bool { return uid == 0 || uid == uint32(os.Getuid()) }

// listen makes a real socket in a fresh private directory under dir.
func listen(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "k.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return path
}

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestCheckSocket(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T) string
		wantErr string // "" means accepted
	}{
		{"a socket in a private directory is accepted", func(t *testing.T) string {
			return listen(t, shortDir(t))
		}, ""},
		{"a sticky world-writable directory is accepted", func(t *testing.T) string {
			dir := shortDir(t)
			os.Chmod(dir, 0o777|os.ModeSticky)
			return listen(t, dir)
		}, ""},
		{"a world-writable directory without the sticky bit is refused", func(t *testing.T) string {
			dir := shortDir(t)
			p := listen(t, dir)
			os.Chmod(dir, 0o777)
			return p
		}, "writable by other users"},
		{"a group-writable directory is refused", func(t *testing.T) string {
			dir := shortDir(t)
			p := listen(t, dir)
			os.Chmod(dir, 0o770)
			return p
		}, "writable by other users"},
		{"a symlink to a socket is refused", func(t *testing.T) string {
			dir := shortDir(t)
			p := listen(t, dir)
			link := filepath.Join(dir, "link.sock")
			if err := os.Symlink(p, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "symlink"},
		{"a regular file is refused", func(t *testing.T) string {
			p := filepath.Join(shortDir(t), "k.sock")
			os.WriteFile(p, nil, 0o600)
			return p
		}, "not a socket"},
		{"a missing socket is refused", func(t *testing.T) string {
			return filepath.Join(shortDir(t), "nothing.sock")
		}, "no such file"},
		{"a path longer than the OS allows is refused", func(t *testing.T) string {
			return "/tmp/" + strings.Repeat("x", MaxLen())
		}, "too long"},
		{"a socket owned by an untrusted uid is refused", func(t *testing.T) string {
			if os.Getuid() != 0 {
				t.Skip("chown to another uid needs root")
			}
			p := listen(t, shortDir(t))
			if err := os.Lchown(p, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			return p
		}, "uid 12345"},
		{"a directory owned by an untrusted uid is refused", func(t *testing.T) string {
			if os.Getuid() != 0 {
				t.Skip("chown to another uid needs root")
			}
			dir := shortDir(t)
			p := listen(t, dir)
			if err := os.Chown(dir, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			return p
		}, "uid 12345"},
		{"a directory reached through another user's symlink in a sticky directory is refused", func(t *testing.T) string {
			if os.Getuid() != 0 {
				t.Skip("two-user case: chown to another uid needs root (CI runs the tests as root)")
			}
			sticky := shortDir(t)
			os.Chmod(sticky, 0o777|os.ModeSticky)
			p := listen(t, shortDir(t))
			link := filepath.Join(sticky, "run")
			if err := os.Symlink(filepath.Dir(p), link); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(link, 12345, 12345); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, filepath.Base(p))
		}, "symlink owned by uid 12345"},
		{"a directory reached through a symlink of our own is accepted", func(t *testing.T) string {
			sticky := shortDir(t)
			os.Chmod(sticky, 0o777|os.ModeSticky)
			p := listen(t, shortDir(t))
			link := filepath.Join(sticky, "run")
			if err := os.Symlink("../"+filepath.Base(filepath.Dir(p)), link); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(link, filepath.Base(p))
		}, ""},
		{"a symlink loop is refused", func(t *testing.T) string {
			dir := shortDir(t)
			if err := os.Symlink("b", filepath.Join(dir, "a")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a", filepath.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "a", "k.sock")
		}, "symlinks on the way"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSocket(tt.setup(t), ownUIDOrRoot)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("accepted, want an error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestTooLongIsASentinel(t *testing.T) {
	if err := CheckLen(strings.Repeat("x", MaxLen()+1)); !errors.Is(err, ErrTooLong) {
		t.Errorf("CheckLen = %v, want ErrTooLong", err)
	}
	if err := CheckLen(strings.Repeat("x", MaxLen())); err != nil {
		t.Errorf("CheckLen at the limit = %v", err)
	}
}

func TestDefault(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	uid := os.Getuid()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"SHAREDOS_SOCKET wins", map[string]string{"SHAREDOS_SOCKET": "/s/k.sock", "XDG_RUNTIME_DIR": "/run/user/1"}, "/s/k.sock"},
		{"then XDG_RUNTIME_DIR", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1", "TMPDIR": "/t"}, "/run/user/1/sharedos/kernel.sock"},
		{"then a per-user directory in TMPDIR", map[string]string{"TMPDIR": "/t"}, filepath.Join("/t", "sharedos-"+strconv.Itoa(uid), "kernel.sock")},
		{"then /tmp", map[string]string{}, filepath.Join("/tmp", "sharedos-"+strconv.Itoa(uid), "kernel.sock")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Default(env(tt.env)); got != tt.want {
				t.Errorf("Default = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMakeDirs(t *testing.T) {
	t.Run("creates what is missing 0700 and returns the real path", func(t *testing.T) {
		base := shortDir(t)
		if err := os.Symlink(base, filepath.Join(base, "self")); err != nil {
			t.Fatal(err)
		}
		got, err := MakeDirs(filepath.Join(base, "self", "a", "b"), ownUIDOrRoot)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(base, "a", "b"); got != want {
			t.Errorf("MakeDirs = %s, want %s", got, want)
		}
		for _, d := range []string{filepath.Join(base, "a"), filepath.Join(base, "a", "b")} {
			if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v %v, want a 0700 directory", d, fi, err)
			}
		}
	})
	t.Run("creates nothing under a directory others can write", func(t *testing.T) {
		open := shortDir(t)
		os.Chmod(open, 0o777)
		_, err := MakeDirs(filepath.Join(open, "a", "b"), ownUIDOrRoot)
		if !errors.Is(err, ErrUntrusted) {
			t.Errorf("MakeDirs: %v, want ErrUntrusted", err)
		}
		if _, err := os.Lstat(filepath.Join(open, "a")); !os.IsNotExist(err) {
			t.Errorf("a directory was created: %v", err)
		}
	})
	t.Run("a file on the way is not a directory", func(t *testing.T) {
		p := filepath.Join(shortDir(t), "f")
		os.WriteFile(p, nil, 0o600)
		if _, err := MakeDirs(filepath.Join(p, "a"), ownUIDOrRoot); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("MakeDirs through a file: %v", err)
		}
	})
}
