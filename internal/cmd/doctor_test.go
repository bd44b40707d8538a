package cmd

import (
	"net"
	"os"
	"path/filepath"
	"slices"
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
			if !strings.HasPrefix(prev, "problem ") && !strings.HasPrefix(prev, "warning ") {
				t.Errorf("fix line %q does not follow a problem or a warning", line)
			}
		case strings.HasPrefix(line, "warning "):
		case strings.HasPrefix(line, "ok      "), strings.HasPrefix(line, "-       "), strings.HasPrefix(line, "note    "):
		default:
			t.Errorf("line %q is neither a check nor a fix", line)
		}
		if (strings.HasPrefix(prev, "problem ") || strings.HasPrefix(prev, "warning ")) && !strings.HasPrefix(line, "  fix: ") {
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
		"ok      socket " + k.Path + " (from --socket): its path is " + strconv.Itoa(len(k.Path)) + " bytes long, within the " + strconv.Itoa(sockpath.MaxLen()) + " a socket path may have here\n",
		"ok      socket is a socket (mode Srw",
		"ok      kernel reachable at " + k.Path + "\n",
		"ok      kernel peer: uid " + strconv.Itoa(os.Getuid()) + " (you), pid " + strconv.Itoa(os.Getpid()) + "\n",
		`ok      hello accepted as integration "claude-code" (named by claude-code user): kernel kerneltest 0, protocol 1, executionId exe_test` + "\n",
		`ok      catalogue for "claude-code": ` + strconv.Itoa(len(kerneltest.Catalogue)) + " tools, catalogHash " + k.Hash + " ",
		"ok      claude-code user: " + filepath.Join(home, ".claude.json") + " runs this binary\n",
		"ok      claude-code user: serve looks for the kernel at " + k.Path + " (--socket in the entry)\n",
		// The home directory is the project directory too: a harness
		// whose two files are one is named once, for its user scope.
		"-       not installed: claude-code (project); codex, gemini, deepseek, cursor (user); pi, vscode, opencode (user and project); 'sharedos-mcp install HARNESS' adds an entry\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "\n"); n != 7+3+1 {
		t.Errorf("%d lines, want 7 kernel checks, three for the entry (what it runs, its socket, what its harness does without a kernel) and one for every entry not installed:\n%s", n, stdout)
	}
	// install's look at the socket is a connection closed unsaid.
	ev := slices.DeleteFunc(k.Events(), func(e string) bool { return e == "closed" })
	if len(ev) < 2 || ev[0] != "hello claude-code" || ev[1] != "list" {
		t.Errorf("kernel saw %q; want hello as the installed claude-code, then list", ev)
	}
}

func TestDoctorWithoutAKernelSaysHowToStartOne(t *testing.T) {
	tempHome(t)
	sock := filepath.Join(shortTempDir(t), "k.sock")
	code, stdout, _ := doctorRun(t, "--socket", sock)
	want := "problem no socket at " + sock + ": no kernel is listening there\n" +
		"  fix: start a kernel: sharedos-mcp kernel --root DIR --socket " + sock + ", or point --socket"
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
	if code != 1 || !strings.Contains(stdout, "problem kernel not reachable at "+sock+": connection refused\n") ||
		!strings.Contains(stdout, "fix: nothing listens on this socket; a kernel that stopped uncleanly left it behind.") {
		t.Errorf("exit %d, output:\n%s", code, stdout)
	}
}

func TestDoctorRefusesASocketInADirectoryOthersCanWrite(t *testing.T) {
	tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	sock, dir := k.Path, filepath.Dir(k.Path)
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
		c, err := install.PlanInstall(h, install.ScopeUser, install.Env{Home: home, Dir: home}, install.NewEntry(command, id, k.Path), install.Options{})
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

// The default doctor checks what is installed: each integration an entry
// names says hello and lists its catalogue, and an empty one is a
// problem whose fix names kernel check.
func TestDoctorChecksEachInstalledIntegrationAndAnEmptyCatalogue(t *testing.T) {
	tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{Tools: []string{}})
	for _, args := range [][]string{
		{"install", "claude-code", "--socket", k.Path},
		{"install", "codex", "--socket", k.Path, "--integration", "team"},
		{"install", "cursor", "--socket", k.Path, "--integration", "team"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, stderr)
		}
	}
	code, stdout, _ := doctorRun(t, "--socket", k.Path)
	for _, want := range []string{
		`ok      hello accepted as integration "claude-code" (named by claude-code user): `,
		`problem catalogue for "claude-code" is empty: no grant gives it a tool, so its harness shows no sharedos tools` + "\n" +
			`  fix: run 'sharedos-mcp kernel check' with the kernel's config to see what each integration may do, and add a [[grant]] with subject = "integration:claude-code"` + "\n",
		`ok      hello accepted as integration "team" (named by codex user, cursor user): `,
		`problem catalogue for "team" is empty`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	// Each check is a turn of its own; the fake kernel's record of two
	// connections may interleave, and install's look at the socket is a
	// connection closed unsaid.
	ev := strings.Join(slices.DeleteFunc(k.Events(), func(e string) bool { return e == "closed" }), ",")
	if !strings.Contains(ev, "hello claude-code,list") || !strings.Contains(ev, "hello team,") ||
		strings.Count(ev, "list") != 2 || strings.Contains(ev, "hello doctor") {
		t.Errorf("kernel saw %s; want a turn as claude-code and one as team, none as doctor", ev)
	}

	// --integration narrows the check to one.
	_, stdout, _ = doctorRun(t, "--socket", k.Path, "--integration", "team")
	if strings.Contains(stdout, `"claude-code"`) || !strings.Contains(stdout, `problem catalogue for "team" is empty`) {
		t.Errorf("--integration team:\n%s", stdout)
	}
}

func TestDoctorWithNothingInstalledSaysHelloAsDoctor(t *testing.T) {
	tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{Tools: []string{}})
	code, stdout, _ := doctorRun(t, "--socket", k.Path)
	for _, want := range []string{
		`-       no installed harness entry names an integration: hello checked as "doctor"; add one with sharedos-mcp install HARNESS` + "\n",
		`ok      hello accepted as integration "doctor": `,
		`ok      catalogue for "doctor": 0 tools`,
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 {
		t.Errorf("exit %d, want 0: an empty catalogue for no installed integration is no problem", code)
	}
}

// A harness started from a GUI has no $XDG_RUNTIME_DIR: an entry that
// relies on serve's default would look in the temp dir instead.
func TestDoctorReportsAnEntryThatAGUIHarnessWouldPointElsewhere(t *testing.T) {
	home := tempHome(t)
	runtime := shortTempDir(t)
	t.Setenv("XDG_RUNTIME_DIR", runtime)
	kernelSock := filepath.Join(runtime, "sharedos", "kernel.sock")
	// An entry written by hand (or by an install before this check) with
	// no --socket.
	h, _ := install.Lookup("gemini")
	c, err := install.PlanInstall(h, install.ScopeUser, install.Env{Home: home, Dir: home}, install.NewEntry(thisBinary(t), "gemini", ""), install.Options{})
	if err == nil {
		err = c.Apply()
	}
	if err != nil {
		t.Fatal(err)
	}
	_, stdout, _ := doctorRun(t)
	bare := install.BareSocket(func(k string) string { return os.Getenv(k) })
	want := "problem gemini user: the entry has no --socket: a harness started from this shell finds " + kernelSock +
		", but one started from a GUI or an IDE (without $XDG_RUNTIME_DIR or $SHAREDOS_SOCKET) looks for " + bare + "\n" +
		"  fix: sharedos-mcp install gemini --scope user (it writes --socket when it is needed)\n"
	if !strings.Contains(stdout, want) {
		t.Errorf("output lacks %q:\n%s", want, stdout)
	}

	// install now pins the socket, and doctor is content.
	code, out, stderr := runCLI(t, "install", "gemini")
	if code != 0 || !strings.Contains(out, "the entry passes --socket "+kernelSock+": a harness started without $XDG_RUNTIME_DIR or $SHAREDOS_SOCKET (from a GUI or an IDE) would look for "+bare+"\n") {
		t.Fatalf("install: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	_, stdout, _ = doctorRun(t)
	if !strings.Contains(stdout, "ok      gemini user: serve looks for the kernel at "+kernelSock+" (--socket in the entry)\n") {
		t.Errorf("after install:\n%s", stdout)
	}

	// An entry pinned to another socket than the kernel doctor checks.
	_, stdout, _ = doctorRun(t, "--socket", filepath.Join(runtime, "other.sock"))
	if !strings.Contains(stdout, "problem gemini user: the entry passes --socket "+kernelSock+", but doctor checked the kernel at "+filepath.Join(runtime, "other.sock")) {
		t.Errorf("with another --socket:\n%s", stdout)
	}
}

func TestInstallLeavesOutTheSocketWhenEveryHarnessFindsIt(t *testing.T) {
	home := tempHome(t)
	code, out, stderr := runCLI(t, "install", "cursor")
	if code != 0 || strings.Contains(out, "--socket") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want no --socket note", code, out, stderr)
	}
	got, _ := os.ReadFile(filepath.Join(home, ".cursor", "mcp.json"))
	if strings.Contains(string(got), "--socket") {
		t.Errorf("the entry names a socket every harness finds anyway:\n%s", got)
	}
}

func TestDoctorReportsPiScriptMode(t *testing.T) {
	home := tempHome(t)
	k := kerneltest.Start(t, kerneltest.Options{})
	if code, _, stderr := runCLI(t, "install", "pi", "--socket", k.Path, "--keep-script-mode"); code != 0 || !strings.Contains(stderr, "sharedos-mcp: warning: pi-mcp-adapter's script mode was left as it is (--keep-script-mode)") {
		t.Fatalf("install --keep-script-mode: exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ := doctorRun(t, "--socket", k.Path)
	want := "problem pi: pi-mcp-adapter's script mode is on (by default: no config file sets settings.scriptMode): its mcpScript tool runs model-written JavaScript in node:vm, which can act outside the kernel with no grant and no audit record\n" +
		"  fix: sharedos-mcp install pi (it turns script mode off)\n"
	if code != 1 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d; output lacks %q:\n%s", code, want, stdout)
	}

	code, out, stderr := runCLI(t, "install", "pi", "--socket", k.Path)
	agent := filepath.Join(home, ".pi", "agent", "mcp.json")
	if code != 0 || !strings.Contains(out, `turned off pi-mcp-adapter's script mode ("settings": {"scriptMode": false} in `+agent+`)`) || stderr != "" {
		t.Fatalf("install pi: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, stdout, _ = doctorRun(t, "--socket", k.Path)
	if code != 0 || !strings.Contains(stdout, "ok      pi: pi-mcp-adapter's script mode is off ("+agent+")\n") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}

	// A project file that turns it back on wins where Pi runs.
	project := filepath.Join(home, ".pi", "mcp.json")
	if err := os.WriteFile(project, []byte(`{"settings": {"scriptMode": true}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stdout, _ = doctorRun(t, "--socket", k.Path)
	if !strings.Contains(stdout, "problem pi: pi-mcp-adapter's script mode is on (set in "+project+")") ||
		!strings.Contains(stdout, "  fix: set \"settings\": {\"scriptMode\": false} in "+project+"\n") {
		t.Errorf("with a project file turning it on:\n%s", stdout)
	}
}
