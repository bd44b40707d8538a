package kernel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/internal/kproto"
	"github.com/sharedos/sharedos-mcp/kernel/audit"
	"github.com/sharedos/sharedos-mcp/kernel/config"
	"github.com/sharedos/sharedos-mcp/kernel/files"
	"github.com/sharedos/sharedos-mcp/kernel/secret"
	"github.com/sharedos/sharedos-mcp/policy"
)

// TestTheKernelsOwnFilesAreNeverServed puts the kernel's config file, its
// state directory (its audit log in it) and a secret file inside its files
// root, with grants that allow everything there, and attacks them by name,
// through a symbolic link, through a hard link, by listing, by searching
// for the secret's value and by writing over them. Each is refused
// denied/kernel_private and recorded; on the code before issue 25 each
// read succeeded.
func TestTheKernelsOwnFilesAreNeverServed(t *testing.T) {
	const value = "ghp_the-secret-value-0123456789"
	all := grant(t, "integration:*", "files:/", true, policy.ActionRead, policy.ActionList, policy.ActionSearch, policy.ActionWrite)
	var home string
	h := startKernel(t, []policy.Grant{all}, func(s *Server) {
		s.AllowHardLinks = true
		home = filepath.Join(s.Root, "home")
		cfgDir := filepath.Join(home, ".config", "sharedos")
		state := filepath.Join(home, ".local", "state", "sharedos")
		for _, d := range []string{cfgDir, state, filepath.Join(cfgDir, "secrets")} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		secretFile := filepath.Join(cfgDir, "secrets", "github")
		writeMode(t, secretFile, value+"\n", 0o600)
		writeMode(t, filepath.Join(cfgDir, "kernel.toml"), "# the kernel's config\n", 0o600)
		writeMode(t, filepath.Join(state, "upstream-pins.json"), "{}\n", 0o600)
		if err := os.Link(secretFile, filepath.Join(s.Root, "public", "innocent.txt")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secretFile, filepath.Join(s.Root, "public", "shortcut")); err != nil {
			t.Fatal(err)
		}
		set, err := secret.Load(t.Context(), []secret.Spec{{Name: "github", Kind: secret.KindFile, File: secretFile}}, secret.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.StateDir = state
		s.Config = config.Config{File: filepath.Join(cfgDir, "kernel.toml"), AuditLog: filepath.Join(state, "audit.jsonl")}
		s.Secrets = set
	})
	c := h.dial()
	c.hello("claude-code")
	c.list()
	call := c.invoke
	private := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"the config file", "files.read", map[string]any{"path": "/home/.config/sharedos/kernel.toml"}},
		{"a secret file", "files.read", map[string]any{"path": "/home/.config/sharedos/secrets/github"}},
		{"a link to a secret file", "files.read", map[string]any{"path": "/public/shortcut"}},
		{"another name of a secret file", "files.read", map[string]any{"path": "/public/innocent.txt"}},
		{"the state directory", "files.list", map[string]any{"path": "/home/.local/state/sharedos"}},
		{"a file in the state directory", "files.read", map[string]any{"path": "/home/.local/state/sharedos/upstream-pins.json"}},
		{"the config, written over", "files.write", map[string]any{"path": "/home/.config/sharedos/kernel.toml", "content": "[[grant]]\n"}},
		{"a new file in the state directory", "files.write", map[string]any{"path": "/home/.local/state/sharedos/upstream-pins.json.new", "content": "{}"}},
		{"searching the state directory", "files.search", map[string]any{"path": "/home/.local/state/sharedos", "query": "{"}},
	}
	for _, tt := range private {
		t.Run(tt.name, func(t *testing.T) {
			r := call(tt.tool, tt.args)
			if r.Status != kproto.StatusDenied || r.Code != files.CodeKernelPrivate {
				t.Errorf("%s %v: %s %s %s", tt.tool, tt.args, r.Status, r.Code, r.Message)
			}
		})
	}
	// A search of the whole root, or of the secrets' directory, finds
	// nothing in them, the hard link included, and says nothing of them.
	for _, dir := range []string{"/", "/home/.config/sharedos/secrets"} {
		r := call("files.search", map[string]any{"path": dir, "query": "ghp_"})
		if r.Status != kproto.StatusSucceeded || strings.Contains(string(r.Output), "ghp_") || strings.Contains(string(r.Output), "innocent") {
			t.Errorf("search of %s: %s %s %s", dir, r.Status, r.Code, r.Output)
		}
	}
	if b, err := os.ReadFile(filepath.Join(home, ".config", "sharedos", "kernel.toml")); err != nil || string(b) != "# the kernel's config\n" {
		t.Errorf("the config now holds %q (%v)", b, err)
	}
	// The rest of the root is served as the grants say.
	if r := call("files.read", map[string]any{"path": "/public/a.txt"}); r.Status != kproto.StatusSucceeded {
		t.Errorf("an ordinary file: %s %s", r.Status, r.Code)
	}
	c.conn.Close()
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	denials := 0
	for _, e := range eventsNamed(h.events(), audit.EventToolInvoked) {
		if e.Code == files.CodeKernelPrivate {
			denials++
		}
	}
	if denials != len(private) {
		t.Errorf("%d kernel_private refusals recorded, want %d", denials, len(private))
	}
}

func writeMode(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}
