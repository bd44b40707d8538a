package secret

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	base, home := "/etc/sharedos", "/home/me"
	tests := []struct {
		name    string
		cfgs    []Config
		want    []Spec
		key     string // of the *ConfigError, when one is wanted
		wantErr error
	}{
		{
			name: "each source, paths made absolute",
			cfgs: []Config{
				{Name: "github", File: "~/.config/sharedos/secrets/github"},
				{Name: "rel", File: "secrets/x"},
				{Name: "abs", File: "/run/secrets/../x"},
				{Name: "pass.github", Command: []string{"pass", "show", "github"}},
				{Name: "GH_token-1", Env: "GITHUB_TOKEN"},
			},
			want: []Spec{
				{Name: "github", Kind: KindFile, File: "/home/me/.config/sharedos/secrets/github"},
				{Name: "rel", Kind: KindFile, File: "/etc/sharedos/secrets/x"},
				{Name: "abs", Kind: KindFile, File: "/run/x"},
				{Name: "pass.github", Kind: KindCommand, Command: []string{"pass", "show", "github"}},
				{Name: "GH_token-1", Kind: KindEnv, Env: "GITHUB_TOKEN"},
			},
		},
		{name: "no source", cfgs: []Config{{Name: "x"}}, key: "", wantErr: ErrNoSource},
		{name: "two sources", cfgs: []Config{{Name: "x", File: "/f", Env: "X"}}, key: "", wantErr: ErrManySources},
		{name: "an empty command is a source, and wrong", cfgs: []Config{{Name: "x", Command: []string{}}}, key: "command"},
		{name: "a name with a space", cfgs: []Config{{Name: "my token", Env: "X"}}, key: "name", wantErr: ErrInvalidName},
		{name: "a name with a brace", cfgs: []Config{{Name: "a}b", Env: "X"}}, key: "name", wantErr: ErrInvalidName},
		{name: "no name", cfgs: []Config{{Env: "X"}}, key: "name", wantErr: ErrInvalidName},
		{name: "a name twice", cfgs: []Config{{Name: "x", Env: "X"}, {Name: "x", Env: "Y"}}, key: "name", wantErr: ErrDuplicateName},
		{name: "an env name with =", cfgs: []Config{{Name: "x", Env: "A=B"}}, key: "env"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.cfgs, base, home)
			if tt.want != nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tt.want) {
					t.Fatalf("got %d specs, want %d", len(got), len(tt.want))
				}
				for i := range got {
					if got[i].Source() != tt.want[i].Source() || got[i].Name != tt.want[i].Name || got[i].Kind != tt.want[i].Kind {
						t.Errorf("spec %d = %+v, want %+v", i, got[i], tt.want[i])
					}
				}
				return
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want a *ConfigError", err)
			}
			if ce.Key != tt.key {
				t.Errorf("key = %q, want %q (%v)", ce.Key, tt.key, err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestSourceNamesWhereNeverWhat(t *testing.T) {
	specs, err := Parse([]Config{{Name: "a", Command: []string{"pass", "show", "github"}}, {Name: "b", Env: "GITHUB_TOKEN"}}, "", "/home/me")
	if err != nil {
		t.Fatal(err)
	}
	if got := specs[0].Source(); got != "command pass show github" {
		t.Errorf("Source = %q", got)
	}
	if got := specs[1].Source(); got != "env GITHUB_TOKEN" {
		t.Errorf("Source = %q", got)
	}
}

// writeSecret writes a secret file with mode perm (set after writing, so
// the umask does not decide it).
func writeSecret(t *testing.T, dir, name, content string, perm fs.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func loadOne(t *testing.T, c Config, opts Options) (string, error) {
	t.Helper()
	specs, err := Parse([]Config{c}, t.TempDir(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	set, err := Load(context.Background(), specs, opts)
	v, _ := set.Value(c.Name)
	return v, err
}

const value = "ghp_abcdefghijklmnop0123456789"

func TestFileSecrets(t *testing.T) {
	dir := t.TempDir()
	good := writeSecret(t, dir, "good", value+"\n", 0o600)
	readOnly := writeSecret(t, dir, "readonly", "  "+value+"  ", 0o400)
	groupRead := writeSecret(t, dir, "group", value, 0o640)
	worldRead := writeSecret(t, dir, "world", value, 0o644)
	groupWrite := writeSecret(t, dir, "groupwrite", value, 0o620)
	empty := writeSecret(t, dir, "empty", "\n\n", 0o600)
	short := writeSecret(t, dir, "short", "abc", 0o600)
	long := writeSecret(t, dir, "long", strings.Repeat("x", MaxLength+1), 0o600)
	nul := writeSecret(t, dir, "nul", "abcdefgh\x00ijkl", 0o600)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		path    string
		opts    Options
		want    string
		wantErr error
		fix     string // the *Error's Fix
	}{
		{name: "a private file, trimmed", path: good, want: value},
		{name: "read-only for its owner", path: readOnly, want: value},
		{name: "a symlink to a private file is the file", path: link, want: value},
		{name: "readable by its group", path: groupRead, wantErr: ErrLoosePermissions, fix: "chmod 600 " + groupRead},
		{name: "readable by everyone", path: worldRead, wantErr: ErrLoosePermissions, fix: "chmod 600 " + worldRead},
		{name: "writable by its group", path: groupWrite, wantErr: ErrLoosePermissions, fix: "chmod 600 " + groupWrite},
		{name: "owned by another uid", path: good, opts: Options{UID: os.Getuid() + 1}, wantErr: ErrNotOwned},
		{name: "missing", path: filepath.Join(dir, "missing"), wantErr: fs.ErrNotExist},
		{name: "a directory", path: dir, wantErr: ErrNotRegular},
		{name: "a FIFO is refused, not waited on", path: fifo, wantErr: ErrNotRegular},
		{name: "empty", path: empty, wantErr: ErrEmpty},
		{name: "too short to redact", path: short, wantErr: ErrTooShort},
		{name: "too long", path: long, wantErr: ErrTooLong},
		{name: "with NUL", path: nul, wantErr: ErrNUL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadOne(t, Config{Name: "s", File: tt.path}, tt.opts)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Fatalf("got %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			var se *Error
			if !errors.As(err, &se) || se.Name != "s" || se.Fix != tt.fix {
				t.Fatalf("err = %#v, want a *Error for s with fix %q", err, tt.fix)
			}
			if tt.fix != "" && !strings.Contains(err.Error(), tt.fix) {
				t.Errorf("the message %q does not say how to fix it", err)
			}
			if strings.Contains(err.Error(), value) || strings.Contains(err.Error(), "abcdefgh") {
				t.Errorf("the message holds the value: %q", err)
			}
		})
	}
}

func TestLoosePermissionsSayWhyAndHow(t *testing.T) {
	p := writeSecret(t, t.TempDir(), "github", value, 0o644)
	_, err := loadOne(t, Config{Name: "github", File: p}, Options{})
	want := `secret "github" (file ` + p + `): mode 0644: group or others can read or write it; fix it with: chmod 600 ` + p
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant   %s", err, want)
	}
}

func TestCommandSecrets(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	// A script in a file, so the command line the errors name does not
	// hold what the script prints.
	leaky := filepath.Join(t.TempDir(), "leaky.sh")
	if err := os.WriteFile(leaky, []byte("echo hunter2hunter2 >&2; echo partial-secret-out; exit 3\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		argv    []string
		opts    Options
		want    string
		wantErr error
		never   []string // what the error must not hold
	}{
		{name: "stdout, trimmed", argv: sh(`printf '\n%s\n' ` + value), want: value},
		{name: "the environment reaches it", argv: sh(`printf %s "$TOKEN_FOR_TEST"`), opts: Options{Environ: []string{"TOKEN_FOR_TEST=" + value}}, want: value},
		{name: "stderr is not kept on success", argv: sh(`echo password: hunter2hunter2 >&2; printf %s ` + value), want: value},
		{
			name: "a failure shows its status, never its stderr or stdout", argv: []string{"sh", leaky},
			wantErr: ErrCommandFailed, never: []string{"hunter2hunter2", "partial-secret-out"},
		},
		{name: "a program not on PATH", argv: []string{"no-such-program-for-sharedos"}, wantErr: exec.ErrNotFound},
		{name: "too much output", argv: sh(`head -c 70000 /dev/zero | tr '\0' a`), wantErr: ErrTooLong},
		{name: "nothing", argv: sh(`true`), wantErr: ErrEmpty},
		{
			name: "a command that hangs, with a child holding stdout, ends at the timeout",
			argv: sh(`sleep 300 & sleep 300`), opts: Options{CommandTimeout: 200 * time.Millisecond}, wantErr: ErrCommandTimeout,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadOne(t, Config{Name: "c", Command: tt.argv}, tt.opts)
			if tt.wantErr == nil {
				if err != nil || got != tt.want {
					t.Fatalf("got %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			for _, s := range tt.never {
				if strings.Contains(err.Error(), s) {
					t.Errorf("the error %q holds %q", err, s)
				}
			}
		})
	}
}

func TestEnvSecrets(t *testing.T) {
	env := map[string]string{"GITHUB_TOKEN": value, "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	got, err := loadOne(t, Config{Name: "gh", Env: "GITHUB_TOKEN"}, Options{LookupEnv: lookup})
	if err != nil || got != value {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := loadOne(t, Config{Name: "gh", Env: "UNSET"}, Options{LookupEnv: lookup}); !errors.Is(err, ErrEnvUnset) {
		t.Errorf("unset: err = %v", err)
	}
	if _, err := loadOne(t, Config{Name: "gh", Env: "EMPTY"}, Options{LookupEnv: lookup}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: err = %v", err)
	}
}

func TestLoadReportsEveryFailureAndKeepsTheRest(t *testing.T) {
	dir := t.TempDir()
	ok := writeSecret(t, dir, "ok", value, 0o600)
	loose := writeSecret(t, dir, "loose", value, 0o604)
	specs, err := Parse([]Config{{Name: "ok", File: ok}, {Name: "loose", File: loose}, {Name: "env", Env: "UNSET"}}, dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	set, err := Load(context.Background(), specs, Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if !errors.Is(err, ErrLoosePermissions) || !errors.Is(err, ErrEnvUnset) {
		t.Fatalf("err = %v, want both failures", err)
	}
	if v, ok := set.Value("ok"); !ok || v != value {
		t.Errorf("ok = %q, %v", v, ok)
	}
	if _, ok := set.Value("loose"); ok {
		t.Error("a refused secret has a value")
	}
}

func TestCheckRunsNothing(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	loose := writeSecret(t, dir, "loose", value, 0o644)
	specs, err := Parse([]Config{
		{Name: "cmd", Command: []string{"sh", "-c", "touch " + marker}},
		{Name: "missing-program", Command: []string{"no-such-program-for-sharedos"}},
		{Name: "loose", File: loose},
	}, dir, dir)
	if err != nil {
		t.Fatal(err)
	}
	err = Check(specs, Options{})
	if !errors.Is(err, exec.ErrNotFound) || !errors.Is(err, ErrLoosePermissions) {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Error("Check ran a command secret")
	}
}

func TestExpand(t *testing.T) {
	set := &Set{values: map[string]string{"github-token": value, "other": "0123456789abcdef"}}
	tests := []struct {
		in, want string
		wantErr  error
		name     string // the RefError's Name
	}{
		{in: "Bearer {secret:github-token}", want: "Bearer " + value},
		{in: "{secret:github-token}:{secret:other}", want: value + ":0123456789abcdef"},
		{in: "no reference", want: "no reference"},
		{in: "{secret:}", wantErr: ErrMalformedRef},
		{in: "{secret:github-token", wantErr: ErrMalformedRef},
		{in: "{secret:a b}", wantErr: ErrMalformedRef},
		{in: "{secret:nope} {secret:github-token}", wantErr: ErrUnknownSecret, name: "nope"},
		{in: "{Secret:github-token}", want: "{Secret:github-token}"}, // only the lowercase prefix refers
	}
	for _, tt := range tests {
		got, err := set.Expand(tt.in)
		if tt.wantErr == nil {
			if err != nil || got != tt.want {
				t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			continue
		}
		var re *RefError
		if !errors.Is(err, tt.wantErr) || !errors.As(err, &re) || re.Name != tt.name {
			t.Errorf("Expand(%q) err = %v, want %v naming %q", tt.in, err, tt.wantErr, tt.name)
			continue
		}
		if strings.Contains(err.Error(), value) {
			t.Errorf("Expand(%q): the error holds a value: %v", tt.in, err)
		}
	}
	refs, err := Refs("{secret:a}{secret:b}x{secret:a}")
	if err != nil || strings.Join(refs, ",") != "a,b" {
		t.Errorf("Refs = %v, %v", refs, err)
	}
	m, err := set.ExpandValues(map[string]string{"Authorization": "Bearer {secret:github-token}", "X-Other": "plain"})
	if err != nil || m["Authorization"] != "Bearer "+value || m["X-Other"] != "plain" {
		t.Errorf("ExpandValues = %v, %v", m, err)
	}
	if _, err := set.ExpandValues(map[string]string{"X-Bad": "{secret:gone}"}); err == nil || !strings.Contains(err.Error(), "X-Bad: {secret:gone}") {
		t.Errorf("ExpandValues error %v does not name the key and the name", err)
	}
}
