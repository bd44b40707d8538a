package cmd

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
	"github.com/sharedos/sharedos-mcp/internal/sockpath"
)

// doctorRun runs doctor in a fresh temporary HOME and checks the output's
// shape: every line is a check or the fix of the problem above it, and
// the exit status says whether there was a problem.
func doctorRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	code, stdout, stderr = runCLI(t, append([]string{"doctor"}, args...)...)
	problems := 0
	prev := ""
	for _, line := range lines(stdout) {
		switch {
		case strings.HasPrefix(line, "problem "):
			problems++
		case strings.HasPrefix(line, "  fix: "):
			if !strings.HasPrefix(prev, "problem ") {
				t.Errorf("fix line %q does not follow a problem", line)
			}
		case strings.HasPrefix(line, "ok      "), strings.HasPrefix(line, "-       "):
		default:
			t.Errorf("line %q is neither a check nor a fix", line)
		}
		if strings.HasPrefix(prev, "problem ") && !strings.HasPrefix(line, "  fix: ") {
			t.Errorf("problem %q has no fix line", prev)
		}
		prev = line
	}
	switch {
	case problems == 0 && (code != 0 || stderr != ""):
		t.Errorf("no problem reported, yet exit %d and stderr %q", code, stderr)
	case problems > 0 && (code != 1 || !strings.HasPrefix(stderr, "sharedos-mcp: error: doctor found "+strconv.Itoa(problems)+" problem")):
		t.Errorf("%d problems reported, yet exit %d and stderr %q", problems, code, stderr)
	}
	return code, stdout, stderr
}

// shortTempDir is a private directory short enough for a socket path.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestDoctorPassesWithAKernelAndThisBinaryInstalled(t *testing.T) {
	home := tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	if code, _, stderr := runCLI(t, "install", "claude-code", "--socket", k.Path); code != 0 {
		t.Fatalf("install: exit %d: %s", code, stderr)
	}
	code, stdout, _ := doctorRun(t, "--socket", k.Path)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stdout)
	}
	for _, want := range []string{
		"ok      sharedos-mcp " + shimVersion() + " at " + thisBinary(t) + "\n",
		"ok      socket " + k.Path + " (from --socket), " + strconv.Itoa(len(k.Path)) + " of " + strconv.Itoa(sockpath.MaxLen()) + " bytes\n",
		"ok      socket is a socket (mode Srw",
		"ok      kernel reachable at " + k.Path + "\n",
		"ok      kernel peer: uid " + strconv.Itoa(os.Getuid()) + " (you), pid " + strconv.Itoa(os.Getpid()) + "\n",
		`ok      hello accepted as integration "doctor": kernel kerneltest 0, protocol 1, executionId exe_test` + "\n",
		`ok      catalogue for "doctor": ` + strconv.Itoa(len(kerneltest.Catalogue)) + " tools, catalogHash " + k.Hash + " ",
		"ok      claude-code user: " + filepath.Join(home, ".claude.json") + " runs this binary\n",
		"-       claude-code project: not installed (" + filepath.Join(home, ".mcp.json") + ")\n",
		"-       codex user: not installed (",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "\n"); n != 7+2*len(install.Harnesses()) {
		t.Errorf("%d lines, want 7 kernel checks and two per harness:\n%s", n, stdout)
	}
	if ev := k.Events(); len(ev) < 2 || ev[0] != "hello doctor" || ev[1] != "list" {
		t.Errorf("kernel saw %q; want hello as doctor, then list", ev)
	}
}

func TestDoctorWithoutAKernelSaysHowToStartOne(t *testing.T) {
	tempHome(t)
	sock := filepath.Join(shortTempDir(t), "k.sock")
	code, stdout, _ := doctorRun(t, "--socket", sock)
	want := "problem no socket at " + sock + ": no kernel is listening there\n" +
		"  fix: start a kernel: sharedos-mcp kernel --root DIR --socket " + sock
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q", code, stdout, want)
	}
	if !strings.Contains(stdout, "-       kernel checks skipped") {
		t.Errorf("kernel checks after the missing socket were not marked skipped:\n%s", stdout)
	}
}

func TestDoctorTellsAStaleSocketFromAMissingOne(t *testing.T) {
	tempHome(t)
	sock := filepath.Join(shortTempDir(t), "k.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	code, stdout, _ := doctorRun(t, "--socket", sock)
	if code != 1 || !strings.Contains(stdout, "problem kernel not reachable at "+sock+": connect: ") ||
		!strings.Contains(stdout, "fix: nothing listens on this socket; a kernel that stopped uncleanly left it behind.") {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}
}

func TestDoctorRefusesASocketInADirectoryOthersCanWrite(t *testing.T) {
	tempHome(t)
	dir := shortTempDir(t)
	sock := filepath.Join(dir, "k.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := doctorRun(t, "--socket", sock)
	want := "problem socket " + sock + " cannot be trusted: " + dir + " is writable by other users"
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, output:\n%s\nwant %q", code, stdout, want)
	}
}

func TestDoctorRefusesACatalogueWhoseHashDisagrees(t *testing.T) {
	tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{WrongHash: true})
	code, stdout, _ := doctorRun(t, "--socket", k.Path, "--integration", "claude-code")
	if code != 1 || !strings.Contains(stdout, `ok      hello accepted as integration "claude-code"`) ||
		!strings.Contains(stdout, "problem catalogue: refused the kernel's catalogue: kernel catalogHash ") {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}
}

func TestDoctorRefusesATooLongSocketPath(t *testing.T) {
	tempHome(t)
	sock := "/tmp/" + strings.Repeat("s", sockpath.MaxLen())
	code, stdout, _ := doctorRun(t, "--socket", sock)
	if code != 1 || !strings.Contains(stdout, "problem socket "+sock+" (from --socket): socket path too long") ||
		!strings.Contains(stdout, "fix: use a shorter socket path") {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}
}

func TestDoctorChecksWhatEachInstalledEntryRuns(t *testing.T) {
	home := tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	other := filepath.Join(t.TempDir(), "other-sharedos-mcp")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "linked-sharedos-mcp")
	if err := os.Symlink(thisBinary(t), link); err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{
		"claude-code": link,                             // this binary through a symlink: ok
		"cursor":      other,                            // another binary
		"gemini":      filepath.Join(home, "gone", "x"), // a binary that is not there
	}
	for id, command := range entries {
		h, _ := install.Lookup(id)
		c, err := install.PlanInstall(h, install.ScopeUser, install.Env{Home: home, Dir: home}, install.NewEntry(command, id, k.Path))
		if err == nil {
			err = c.Apply()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(home, ".mcp.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ := doctorRun(t, "--socket", k.Path)
	for _, want := range []string{
		"ok      claude-code user: " + filepath.Join(home, ".claude.json") + " runs this binary\n",
		"problem claude-code project: " + filepath.Join(home, ".mcp.json") + ": line 1",
		"problem cursor user: " + filepath.Join(home, ".cursor", "mcp.json") + " runs " + other + ", not this binary (" + thisBinary(t) + ")\n" +
			"  fix: sharedos-mcp install cursor --scope user",
		"problem gemini user: " + filepath.Join(home, ".gemini", "settings.json") + " runs " + entries["gemini"] + ", which cannot be found: ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
