package e2e

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readmeBlock returns the commands of the README's sh block between
// <!-- name:begin --> and <!-- name:end -->, each without its trailing
// comment.
func readmeBlock(t *testing.T, readme, name string) []string {
	t.Helper()
	block := regexp.MustCompile("(?s)<!-- " + name + ":begin -->\\s*```sh\n(.*?)```\\s*<!-- " + name + ":end -->").FindStringSubmatch(readme)
	if block == nil {
		t.Fatalf("README.md has no %s block between <!-- %[1]s:begin --> and <!-- %[1]s:end -->", name)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block[1]), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// TestReadmeQuickstartOnAFreshClone follows the README literally in a
// fresh clone of the committed tree: the first command must show an
// allowed call and a denied one; the second must be the test command
// .ci/run runs (running the suite from inside the suite would recurse).
func TestReadmeQuickstartOnAFreshClone(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds it")
	}
	readme, err := os.ReadFile(repoRoot + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeBlock(t, string(readme), "quickstart")
	if len(cmds) != 2 {
		t.Fatalf("the quickstart has %d commands, want 2 (run the demo, run the tests): %q", len(cmds), cmds)
	}
	ci, err := os.ReadFile(repoRoot + "/.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(cmds[1]) + `$`).Match(ci) {
		t.Errorf(".ci/run does not run the README's test command %q", cmds[1])
	}

	clone := t.TempDir()
	if out, err := exec.Command("git", "clone", "--quiet", repoRoot, clone).CombinedOutput(); err != nil {
		t.Skipf("cannot clone this checkout (%v): %s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", cmds[0])
	cmd.Dir = clone
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a fresh clone: %v\n%s", cmds[0], err, out)
	}
	for _, want := range []string{"tools/call: allowed:", "tools/call: denied (", "tool.invoked", "turn.closed"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s printed no %q:\n%s", cmds[0], want, out)
		}
	}
}

// TestReadmeInstallFromACloneOnAFreshHome follows the README's "use it
// with your harness" block line by line, in a fresh clone and a fresh
// home directory: the install line literally, with GOBIN a temporary
// directory; then the starter config, its check, the kernel, the entry
// and doctor, which must find nothing to fix. The claude line runs when
// the claude CLI is on PATH.
func TestReadmeInstallFromACloneOnAFreshHome(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds it")
	}
	readme, err := os.ReadFile(repoRoot + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	cmds := readmeBlock(t, string(readme), "install")
	if len(cmds) == 0 || !strings.Contains(cmds[0], "make install") {
		t.Fatalf("the install block does not start with make install: %q", cmds)
	}
	clone := t.TempDir()
	if out, err := exec.Command("git", "clone", "--quiet", repoRoot, clone).CombinedOutput(); err != nil {
		t.Skipf("cannot clone this checkout (%v): %s", err, out)
	}
	gobin, home := t.TempDir(), t.TempDir()
	tmp, err := os.MkdirTemp("", "rd") // short: the default socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	// The README's ~/work is not made here: a new user may not have it,
	// and kernel init makes it.
	// The build keeps this machine's Go caches; everything after it sees
	// only the fresh home.
	goEnv := func(k string) string {
		out, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", k, err)
		}
		return strings.TrimSpace(string(out))
	}
	buildEnv := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp, "GOBIN=" + gobin,
		"GOPATH=" + goEnv("GOPATH"), "GOCACHE=" + goEnv("GOCACHE"), "GOMODCACHE=" + goEnv("GOMODCACHE"), "GOFLAGS=" + goEnv("GOFLAGS"),
		"GOPROXY=" + goEnv("GOPROXY"), "GOTOOLCHAIN=" + goEnv("GOTOOLCHAIN")}
	userEnv := []string{"PATH=" + gobin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(line, dir string, env []string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "sh", "-c", line)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		return string(out)
	}

	out := run(cmds[0], clone, buildEnv)
	bin := filepath.Join(gobin, "sharedos-mcp")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s put no binary in GOBIN: %v\n%s", cmds[0], err, out)
	}
	if !strings.Contains(out, "installed "+bin+"\n") || !strings.Contains(out, "note: "+gobin+" is not on PATH") {
		t.Errorf("%s did not say where the binary went and that it is not on PATH:\n%s", cmds[0], out)
	}

	var doctorOut string
	for _, line := range cmds[1:] {
		switch {
		case strings.HasSuffix(line, "&"):
			startReadmeKernel(t, strings.TrimSpace(strings.TrimSuffix(line, "&")), home, userEnv)
		case strings.HasPrefix(line, "claude "):
			claude, err := exec.LookPath("claude")
			if err != nil {
				t.Logf("%s: skipped, claude is not on PATH", line)
				continue
			}
			entry := "sharedos: " + bin + " serve --integration claude-code - "
			if l := claudeMCPList(t, claude, home, userEnv, entry); !strings.Contains(l, "Connected") {
				t.Errorf("%s says %q; want Connected", line, l)
			}
		default:
			out := run(line, home, userEnv)
			if strings.Contains(line, " doctor") {
				doctorOut = out
			}
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "sharedos", "kernel.toml")); err != nil {
		t.Errorf("kernel init wrote no config in the default place: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(home, "work")); err != nil || !fi.IsDir() {
		t.Errorf("kernel init did not make the files root ~/work: %v", err)
	}
	if !strings.Contains(doctorOut, `ok      catalogue for "claude-code": 5 tools`) {
		t.Errorf("doctor did not find claude-code's catalogue:\n%s", doctorOut)
	}
}

// startReadmeKernel runs the README's kernel line in the background and
// returns once the kernel says it is listening; it is stopped, by its
// PID, when the test ends, and must exit 0.
func startReadmeKernel(t *testing.T, line, dir string, env []string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exec "+line)
	cmd.Dir, cmd.Env = dir, env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	listening := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		br := bufio.NewReader(pipe)
		first, _ := br.ReadString('\n')
		listening <- first
		_, _ = br.WriteTo(&rest)
		done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := <-done; err != nil {
			t.Errorf("%s: %v after SIGTERM\n%s", line, err, &rest)
		}
	})
	select {
	case first := <-listening:
		if !strings.Contains(first, "kernel listening on ") {
			t.Fatalf("%s did not start: %q", line, first)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not say it was listening within 30s", line)
	}
}
