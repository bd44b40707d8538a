package install

import (
	"os"
	"strconv"
	"testing"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestSocketArgPinsASocketThatAHarnessWithoutTheShellsEnvironmentWouldMiss(t *testing.T) {
	uid := strconv.Itoa(os.Getuid())
	tests := []struct {
		name   string
		vars   map[string]string
		socket string
		want   string
	}{
		{"the default under XDG_RUNTIME_DIR: a GUI harness would look in /tmp",
			map[string]string{"XDG_RUNTIME_DIR": "/run/user/1000"}, "/run/user/1000/sharedos/kernel.sock", "/run/user/1000/sharedos/kernel.sock"},
		{"the temp-dir default, which every environment finds",
			map[string]string{}, "/tmp/sharedos-" + uid + "/kernel.sock", ""},
		{"the temp-dir default with TMPDIR, which GUI applications share",
			map[string]string{"TMPDIR": "/var/folders/x/T"}, "/var/folders/x/T/sharedos-" + uid + "/kernel.sock", ""},
		{"a socket from SHAREDOS_SOCKET, which a shell profile sets",
			map[string]string{"SHAREDOS_SOCKET": "/home/u/k.sock"}, "/home/u/k.sock", "/home/u/k.sock"},
		{"the same path spelled unclean",
			map[string]string{}, "/tmp//sharedos-" + uid + "/kernel.sock", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SocketArg(tt.socket, env(tt.vars)); got != tt.want {
				t.Errorf("SocketArg(%q) = %q, want %q", tt.socket, got, tt.want)
			}
		})
	}
}

func TestInBuildCache(t *testing.T) {
	home := Env{Home: "/home/u", GOOS: "linux", Getenv: env(nil)}
	tests := []struct {
		exe  string
		e    Env
		want bool
	}{
		{"/tmp/go-build2093400934/b001/exe/sharedos-mcp", home, true},
		{"/var/folders/x/T/go-build17/b001/exe/sharedos-mcp", home, true},
		{"/home/u/.cache/go-build/ab/abcdef-d/sharedos-mcp", home, true},
		{"/cache/ab/sharedos-mcp", Env{Home: "/home/u", Getenv: env(map[string]string{"GOCACHE": "/cache"})}, true},
		{"/home/u/Library/Caches/go-build/ab/x", Env{Home: "/home/u", GOOS: "darwin", Getenv: env(nil)}, true},
		{"/home/u/go/bin/sharedos-mcp", home, false},
		{"/usr/local/bin/sharedos-mcp", home, false},
		// go test's binaries are not what install runs from.
		{"/tmp/go-build1/b001/cmd.test", home, false},
		{"/home/u/.cache/go-build-notes/sharedos-mcp", home, false},
	}
	for _, tt := range tests {
		if got := InBuildCache(tt.exe, tt.e); got != tt.want {
			t.Errorf("InBuildCache(%q) = %v, want %v", tt.exe, got, tt.want)
		}
	}
}
