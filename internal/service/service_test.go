package service

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
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

// fakeManager puts a systemctl on PATH that records its arguments and
// exits with code, printing out.
func fakeManager(t *testing.T, code int, out string) (logFile string) {
	t.Helper()
	dir := t.TempDir()
	logFile = filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> '" + logFile + "'\nprintf '%s\\n' '" + out + "'\nexit " + string(rune('0'+code)) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(script), 0o755); err != nil {
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
	log := fakeManager(t, 0, "active")
	p := Platform{OS: "linux", Home: t.TempDir()}
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
	want := []string{"--user daemon-reload", "--user enable --now " + SystemdUnit}
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
	want = append(want, "--user is-active "+SystemdUnit, "--user disable --now "+SystemdUnit, "--user daemon-reload")
	if got := calls(t, log); !slices.Equal(got, want) {
		t.Errorf("systemctl calls = %q, want %q", got, want)
	}
	if removed, err := p.Uninstall(ExecRunner); err != nil || removed {
		t.Errorf("a second uninstall = %v, %v; want false, nil", removed, err)
	}
}

// TestInstallWithoutAUserManagerKeepsTheFileAndSaysWhy: a shell with no
// user session bus (ssh, a container) cannot start the unit; the file is
// written and the error names the command that failed.
func TestInstallWithoutAUserManagerKeepsTheFileAndSaysWhy(t *testing.T) {
	fakeManager(t, 1, "Failed to connect to bus: No medium found")
	p := Platform{OS: "linux", Home: t.TempDir()}
	path, err := p.Install(spec(), ExecRunner)
	var me *ManagerError
	if !errors.As(err, &me) || !strings.Contains(me.Error(), "systemctl --user daemon-reload failed") || !strings.Contains(me.Error(), "No medium found") {
		t.Fatalf("install error = %v, want a ManagerError naming the command and its output", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the unit file was not written: %v", err)
	}
}

func TestStatusReadsTheOneWordState(t *testing.T) {
	fakeManager(t, 3, "inactive")
	st, err := Platform{OS: "linux", Home: t.TempDir()}.Status(ExecRunner)
	if err != nil || st.Installed || st.State != "inactive" || st.Logs != "journalctl --user -u "+SystemdUnit {
		t.Errorf("status = %+v, %v; want not installed, inactive, the journal", st, err)
	}
	fakeManager(t, 1, "Failed to connect to bus: No medium found")
	st, err = Platform{OS: "linux", Home: t.TempDir()}.Status(ExecRunner)
	if err != nil || st.State != "" || !strings.Contains(st.Detail, "No medium found") {
		t.Errorf("status without a bus = %+v, %v; want no state and the reason", st, err)
	}
}
