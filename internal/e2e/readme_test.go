package e2e

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// quickstart returns the commands of the README's quickstart block, each
// without its trailing comment.
func quickstart(t *testing.T, readme string) []string {
	t.Helper()
	block := regexp.MustCompile("(?s)<!-- quickstart:begin -->\\s*```sh\n(.*?)```\\s*<!-- quickstart:end -->").FindStringSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no quickstart block between <!-- quickstart:begin --> and <!-- quickstart:end -->")
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
	cmds := quickstart(t, string(readme))
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
