package doctor

import (
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

func TestSocketChoiceSaysWhereThePathCameFrom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		flag     string
		env      map[string]string
		wantFrom string
	}{
		{"the flag wins", "/run/x.sock", map[string]string{"SHAREDOS_SOCKET": "/e.sock", "XDG_RUNTIME_DIR": "/run/user/1"}, "--socket"},
		{"then $SHAREDOS_SOCKET", "", map[string]string{"SHAREDOS_SOCKET": "/e.sock", "XDG_RUNTIME_DIR": "/run/user/1"}, "$SHAREDOS_SOCKET"},
		{"then $XDG_RUNTIME_DIR", "", map[string]string{"XDG_RUNTIME_DIR": "/run/user/1"}, "$XDG_RUNTIME_DIR"},
		{"then the default", "", map[string]string{"TMPDIR": "/var/tmp"}, "the default, as neither $SHAREDOS_SOCKET nor $XDG_RUNTIME_DIR is set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			path, from := SocketChoice(tc.flag, getenv)
			want := tc.flag
			if want == "" {
				want = sockpath.Default(getenv) // serve's choice, which doctor must agree with
			}
			if path != want || from != tc.wantFrom {
				t.Errorf("SocketChoice = %q, %q; want %q, %q", path, from, want, tc.wantFrom)
			}
		})
	}
}
