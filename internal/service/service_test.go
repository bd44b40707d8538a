package service

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata from the current rendering")

// awkward has every character the unit formats treat specially.
const awkward = `/home/a b/%h $HOME "q" \x & <y>.toml`

func spec() Spec {
	return Spec{
		Executable: "/usr/local/bin/sharedos-mcp",
		Config:     awkward,
		Socket:     "/run/user/1000/sharedos/kernel.sock",
		LogFile:    "/Users/me/Library/Logs/sharedos-kernel.log",
	}
}

func TestRenderMatchesGolden(t *testing.T) {
	for _, tc := range []struct{ os, file string }{
		{"linux", SystemdUnit},
		{"darwin", LaunchdName + ".plist"},
	} {
		t.Run(tc.os, func(t *testing.T) {
			got, err := Platform{OS: tc.os}.Render(spec())
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.file)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s (run make golden after reviewing):\n%s", tc.os, golden, got)
			}
		})
	}
}

// TestSystemdAcceptsTheUnit has systemd itself parse the unit, with a real
// executable in ExecStart, and insists on no complaint at all: it reports
// unknown values on stderr with exit status 0.
func TestSystemdAcceptsTheUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed; the golden test still pins the unit")
	}
	s := spec()
	if s.Executable, err = os.Executable(); err != nil {
		t.Fatal(err)
	}
	unit, err := Platform{OS: "linux"}.Render(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), SystemdUnit)
	if err := os.WriteFile(path, unit, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s\n%s", err, out, unit)
	}
}

// TestLaunchdArgumentsSurviveEscaping reads the plist back as XML: the
// program arguments are exactly the kernel's, whatever the paths hold.
func TestLaunchdArgumentsSurviveEscaping(t *testing.T) {
	plist, err := Platform{OS: "darwin"}.Render(spec())
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(plist))
	var strs []string
	inArray := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch e := tok.(type) {
		case xml.StartElement:
			if e.Name.Local == "array" {
				inArray = true
			}
			if inArray && e.Name.Local == "string" {
				var s string
				if err := dec.DecodeElement(&s, &e); err != nil {
					t.Fatal(err)
				}
				strs = append(strs, s)
			}
		case xml.EndElement:
			if e.Name.Local == "array" {
				inArray = false
			}
		}
	}
	if want := spec().args(); !slices.Equal(strs, want) {
		t.Errorf("ProgramArguments = %q, want %q", strs, want)
	}
}

func TestRenderRefusesWhatAUnitCannotHold(t *testing.T) {
	for name, s := range map[string]Spec{
		"a relative config": {Executable: "/bin/x", Config: "kernel.toml", Socket: "/s"},
		"a newline":         {Executable: "/bin/x", Config: "/a\nExecStartPre=/bin/evil", Socket: "/s"},
	} {
		if _, err := (Platform{OS: "linux"}).Render(s); err == nil {
			t.Errorf("%s: rendered, want an error", name)
		}
	}
	if _, err := (Platform{OS: "plan9"}).Render(spec()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("plan9: %v, want ErrUnsupported", err)
	}
}

// reply is what the fake systemctl prints for one command line, and its
// exit code.
type reply struct {
	out  string
	code int
}

// noSystemd is the fake systemctl's answers on a system that systemd
// does not run (a container), where every systemctl fails.
var noSystemd = map[string]reply{
	"--user is-system-running": {"Failed to connect to bus: No medium found\noffline", 1},
	"is-system-running":        {"offline", 1},
	"*":                        {"Failed to connect to bus: No medium found", 1},
}

// fakeManager puts a systemctl on PATH that records its arguments and
// answers each command line as replies says ("*" for any other; exit 0
// and nothing without it).
func fakeManager(t *testing.T, replies map[string]reply) (logFile string) {
	t.Helper()
	dir := t.TempDir()
	logFile = filepath.Join(dir, "calls")
	var b strings.Builder
	b.WriteString("#!/bin/sh\necho \"$*\" >> '" + logFile + "'\ncase \"$*\" in\n")
	for _, args := range slices.Sorted(maps.Keys(replies)) {
		r := replies[args]
		pattern := "'" + args + "'"
		if args == "*" {
			pattern = "*"
		}
		fmt.Fprintf(&b, "%s) printf '%%s\\n' '%s'; exit %d ;;\n", pattern, strings.ReplaceAll(r.out, "\n", "' '"), r.code)
	}
	b.WriteString("esac\n")
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(b.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return logFile
}

func calls(t *testing.T, logFile string) []string {
	t.Helper()
	b, err := os.ReadFile(logFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

func TestInstallWritesTheUnitAndStartsIt(t *testing.T) {
	log := fakeManager(t, map[string]reply{"--user is-system-running": {"running", 0}, "--user is-active " + SystemdUnit: {"active", 0}})
	p := Platform{OS: "linux", Home: t.TempDir(), RuntimeDir: "/run/user/1000"}
	path, err := p.Install(spec(), ExecRunner)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(p.Home, ".config", "systemd", "user", SystemdUnit); path != want {
		t.Errorf("unit at %s, want %s", path, want)
	}
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := p.Render(spec()); !bytes.Equal(written, want) {
		t.Errorf("the file differs from the rendered unit:\n%s", written)
	}
	want := []string{"--user is-system-running", "--user daemon-reload", "--user enable --now " + SystemdUnit}
	if got := calls(t, log); !slices.Equal(got, want) {
		t.Errorf("systemctl calls = %q, want %q", got, want)
	}

	st, err := p.Status(ExecRunner)
	if err != nil || !st.Installed || st.State != "active" {
		t.Errorf("status after install = %+v, %v", st, err)
	}

	removed, err := p.Uninstall(ExecRunner)
	if err != nil || !removed {
		t.Fatalf("uninstall = %v, %v", removed, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unit file is still there: %v", err)
	}
	want = append(want, "--user is-active "+SystemdUnit, "--user is-system-running", "--user disable --now "+SystemdUnit, "--user daemon-reload")
	if got := calls(t, log); !slices.Equal(got, want) {
		t.Errorf("systemctl calls = %q, want %q", got, want)
	}
	if removed, err := p.Uninstall(ExecRunner); err != nil || removed {
		t.Errorf("a second uninstall = %v, %v; want false, nil", removed, err)
	}
}

// TestInstallWhereNoManagerRunsWritesNothing: a container, WSL without
// systemd, a shell with no login session behind it: Install says why in
// words, whether lingering would help, and leaves no file and no
// directory behind.
func TestInstallWhereNoManagerRunsWritesNothing(t *testing.T) {
	noUserManager := map[string]reply{
		"--user is-system-running": {"Failed to connect to bus: No such file or directory\noffline", 1},
		"is-system-running":        {"degraded", 1},
	}
	for _, tt := range []struct {
		name       string
		replies    map[string]reply // nil: no systemctl on PATH at all
		runtimeDir string
		why        string
		linger     bool
	}{
		{"systemd is not the init", noSystemd, "/run/user/1000", "systemd does not run this system (a container, or WSL without systemd)", false},
		{"no systemctl at all", nil, "", "systemctl is not installed: this system does not run systemd", false},
		{"no user manager for this user", noUserManager, "/run/user/1000", "no systemd user manager runs for you (no login session", true},
		{"no XDG_RUNTIME_DIR to find it by", noUserManager, "", "XDG_RUNTIME_DIR is not set", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := ""
			if tt.replies != nil {
				log = fakeManager(t, tt.replies)
			} else {
				t.Setenv("PATH", t.TempDir())
			}
			p := Platform{OS: "linux", Home: t.TempDir(), RuntimeDir: tt.runtimeDir}
			_, err := p.Install(spec(), ExecRunner)
			var nm *NoManagerError
			if !errors.As(err, &nm) || !strings.Contains(nm.Why, tt.why) || nm.Linger != tt.linger {
				t.Fatalf("install = %#v, want a NoManagerError saying %q, linger %v", err, tt.why, tt.linger)
			}
			if _, err := os.Stat(filepath.Join(p.Home, ".config")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("install left %s behind: %v", filepath.Join(p.Home, ".config"), err)
			}
			if log != "" {
				for _, c := range calls(t, log) {
					if !strings.HasSuffix(c, "is-system-running") {
						t.Errorf("asked the manager %q; want only whether it runs", c)
					}
				}
			}
		})
	}
}

// TestInstallRefusedByTheManagerPutsTheFileBack: when the manager cannot
// start the unit, install leaves the file as it found it: none, or the
// unit installed before.
func TestInstallRefusedByTheManagerPutsTheFileBack(t *testing.T) {
	log := fakeManager(t, map[string]reply{
		"--user is-system-running":           {"running", 0},
		"--user enable --now " + SystemdUnit: {"Job for sharedos-kernel.service failed.", 1},
	})
	p := Platform{OS: "linux", Home: t.TempDir(), RuntimeDir: "/run/user/1000"}
	path, err := p.Install(spec(), ExecRunner)
	var me *ManagerError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "systemctl --user enable --now "+SystemdUnit+" failed") {
		t.Fatalf("install = %v, want the enable that failed", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unit file was left behind: %v", err)
	}
	want := []string{"--user is-system-running", "--user daemon-reload", "--user enable --now " + SystemdUnit, "--user disable " + SystemdUnit, "--user daemon-reload"}
	if got := calls(t, log); !slices.Equal(got, want) {
		t.Errorf("systemctl calls = %q, want %q", got, want)
	}

	before := []byte("# the unit installed before\n")
	if err := os.WriteFile(path, before, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Install(spec(), ExecRunner); !errors.As(err, &me) {
		t.Fatalf("install = %v, want a ManagerError", err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, before) {
		t.Errorf("the unit installed before is now %q (%v), want it back", got, err)
	}
}

func TestUninstallWhereNoManagerRunsRemovesTheFile(t *testing.T) {
	log := fakeManager(t, noSystemd)
	p := Platform{OS: "linux", Home: t.TempDir()}
	path, _ := p.UnitPath()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("unit"), 0o644); err != nil {
		t.Fatal(err)
	}
	if removed, err := p.Uninstall(ExecRunner); err != nil || !removed {
		t.Fatalf("uninstall = %v, %v; want the file removed", removed, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the unit file is still there: %v", err)
	}
	if got := calls(t, log); slices.ContainsFunc(got, func(c string) bool { return !strings.HasSuffix(c, "is-system-running") }) {
		t.Errorf("systemctl calls = %q; with no manager there is nothing to stop or reload", got)
	}
}

func TestStatusReadsTheOneWordState(t *testing.T) {
	fakeManager(t, map[string]reply{"--user is-active " + SystemdUnit: {"inactive", 3}})
	st, err := Platform{OS: "linux", Home: t.TempDir()}.Status(ExecRunner)
	if err != nil || st.Installed || st.State != "inactive" || st.Logs != "journalctl --user -u "+SystemdUnit {
		t.Errorf("status = %+v, %v; want not installed, inactive, the journal", st, err)
	}
	fakeManager(t, noSystemd)
	st, err = Platform{OS: "linux", Home: t.TempDir()}.Status(ExecRunner)
	if err != nil || st.State != "" || !strings.Contains(st.Detail, "No medium found") {
		t.Errorf("status without a bus = %+v, %v; want no state and the reason", st, err)
	}
}
