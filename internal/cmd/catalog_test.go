package cmd

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/install"
	"github.com/sharedos/sharedos-mcp/internal/kerneltest"
)

// catalogJSON is the --json document as a reader of it sees it.
type catalogJSON struct {
	Integration string `json:"integration"`
	CatalogHash string `json:"catalogHash"`
	ExecutionID string `json:"executionId"`
	Kernel      struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"kernel"`
	Harnesses []string `json:"harnesses"`
	Tools     []struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema"`
		Annotations  struct {
			ReadOnlyHint    bool  `json:"readOnlyHint"`
			DestructiveHint *bool `json:"destructiveHint"`
			IdempotentHint  *bool `json:"idempotentHint"`
		} `json:"annotations"`
		Namespace string `json:"namespace"`
		Source    string `json:"source"`
		ReadOnly  bool   `json:"readOnly"`
		Aliases   map[string]struct {
			Alias     string   `json:"alias"`
			Rewritten bool     `json:"rewritten"`
			Truncated bool     `json:"truncated"`
			Hashed    bool     `json:"hashed"`
			TooLong   bool     `json:"tooLong"`
			Collides  bool     `json:"collides"`
			Notes     []string `json:"notes"`
		} `json:"aliases"`
	} `json:"tools"`
}

func catalogDoc(t *testing.T, args ...string) catalogJSON {
	t.Helper()
	code, stdout, stderr := runCLI(t, append([]string{"catalog", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("catalog exit %d: %s", code, stderr)
	}
	var doc catalogJSON
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("--json output does not decode: %v\n%s", err, stdout)
	}
	return doc
}

func TestCatalogDefaultsTheIntegrationToTheHarnessAndShowsItsAliases(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	code, stdout, stderr := runCLI(t, "catalog", "--socket", k.Path, "--harness", "claude-code")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if ev := k.Events(); len(ev) == 0 || ev[0] != "hello claude-code" {
		t.Errorf("kernel events %q; want the turn opened as integration claude-code", ev)
	}
	for _, want := range [][]string{
		{"integration", "claude-code"},
		{"catalogHash", k.Hash, "(matches", "the", "published", "projection)"},
		{"tools", strconv.Itoa(len(kerneltest.Catalogue))},
		// The form Claude Code was observed to show (docs/harness-driving.md).
		{"claude-code", "files.read", "mcp__sharedos__files_read", "rewritten"},
	} {
		if !hasRow(stdout, want...) {
			t.Errorf("output has no row %q:\n%s", want, stdout)
		}
	}
	if !hasRow(stdout, "files.write", "write", "Write", "a", "file;", "always", "denied.") {
		t.Errorf("files.write is not shown as a write tool with its description:\n%s", stdout)
	}
	if strings.Contains(stdout, "\ncodex ") {
		t.Errorf("output shows aliases of a harness not asked for:\n%s", stdout)
	}
}

// hasRow reports whether out has a line made of exactly these
// whitespace-separated fields, however the table pads them.
func hasRow(out string, fields ...string) bool {
	for _, line := range lines(out) {
		if slices.Equal(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

func TestCatalogJSONHasEveryToolWithAnAliasForEveryHarness(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{})
	doc := catalogDoc(t, "--socket", k.Path, "--integration", "ci bot")
	if doc.Integration != "ci bot" || doc.CatalogHash != k.Hash || doc.ExecutionID == "" || doc.Kernel.Name != "kerneltest" {
		t.Errorf("header = %+v; want integration \"ci bot\", hash %s, an executionId and kernel kerneltest", doc, k.Hash)
	}
	if !slices.Equal(doc.Harnesses, install.Harnesses()) {
		t.Errorf("harnesses = %q, want all of %q", doc.Harnesses, install.Harnesses())
	}
	if len(doc.Tools) != len(kerneltest.Catalogue) {
		t.Fatalf("%d tools, want %d", len(doc.Tools), len(kerneltest.Catalogue))
	}
	names := make([]string, len(doc.Tools))
	for i, tool := range doc.Tools {
		names[i] = tool.Name
		if len(tool.Aliases) != len(install.Harnesses()) {
			t.Errorf("%s has aliases for %d harnesses, want %d", tool.Name, len(tool.Aliases), len(install.Harnesses()))
		}
		switch tool.Name {
		case "files.write":
			if tool.ReadOnly {
				t.Error("files.write is readOnly")
			}
		case "files.read":
			if !tool.ReadOnly || !tool.Annotations.ReadOnlyHint || tool.Namespace != "files" || tool.Source != "kerneltest" ||
				!strings.HasPrefix(tool.Description, "Read a file") || !strings.Contains(string(tool.InputSchema), `"path"`) {
				t.Errorf("files.read = %+v", tool)
			}
			if a := tool.Aliases["claude-code"]; a.Alias != "mcp__sharedos__files_read" || !a.Rewritten || a.Collides {
				t.Errorf("claude-code alias of files.read = %+v", a)
			}
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("tools %q are not in the published (sorted) order", names)
	}
	// hash reads the document and finds the catalogHash it states.
	_, stdout, _ := runCLI(t, "catalog", "--json", "--socket", k.Path, "--integration", "ci bot")
	if code, out, errOut := runHashCmd(t, stdout); code != 0 || out != k.Hash+"\n" {
		t.Errorf("hash of catalog --json = %d, %q, %q; want 0, %s", code, out, errOut, k.Hash)
	}
	// Metadata the kernel keeps to itself never reaches the output.
	b, _ := json.Marshal(doc)
	if strings.Contains(string(b), "never published") {
		t.Error("kernel-internal metadata leaked into the catalog output")
	}
}

func TestCatalogFlagsCollidingAndOverlongNames(t *testing.T) {
	long := "x." + strings.Repeat("y", 60)
	tool := func(name string) string {
		return `{"name":"` + name + `","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{"type":"object"}}`
	}
	k := kerneltest.Start(t, kerneltest.Options{Tools: []string{tool("a.b"), tool("a_b"), tool(long)}})
	doc := catalogDoc(t, "--socket", k.Path, "--integration", "x")
	byName := map[string]int{}
	for i, tl := range doc.Tools {
		byName[tl.Name] = i
	}
	for _, name := range []string{"a.b", "a_b"} {
		if a := doc.Tools[byName[name]].Aliases["claude-code"]; !a.Collides || a.Alias != "mcp__sharedos__a_b" {
			t.Errorf("claude-code alias of %s = %+v; want mcp__sharedos__a_b, flagged as colliding", name, a)
		}
	}
	l := doc.Tools[byName[long]]
	if a := l.Aliases["claude-code"]; !a.TooLong || a.Truncated {
		t.Errorf("claude-code alias of a %d-character name = %+v; want too long, not cut", len(long), a)
	}
	if a := l.Aliases["codex"]; !a.Truncated || !a.Hashed || len(a.Alias) != 64 {
		t.Errorf("codex alias of a %d-character name = %+v; want cut to 64 with a hash", len(long), a)
	}

	code, stdout, stderr := runCLI(t, "catalog", "--socket", k.Path, "--harness", "claude-code", "--integration", "x")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "3 aliases need a look:\n") || !strings.Contains(stdout, "same alias as a_b\n") ||
		!strings.Contains(stdout, "  claude-code "+long+": "+strconv.Itoa(len("mcp__sharedos__"+long))+" characters: over the 64 the model API accepts") {
		t.Errorf("text output does not call out the collision and the long name:\n%s", stdout)
	}
}

func TestCatalogRefusesACatalogueWhoseHashDisagrees(t *testing.T) {
	k := kerneltest.Start(t, kerneltest.Options{WrongHash: true})
	code, stdout, stderr := runCLI(t, "catalog", "--socket", k.Path, "--harness", "codex")
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	if !strings.Contains(stderr, "sharedos-mcp: error: catalog: refused the kernel's catalogue: kernel catalogHash") || !strings.Contains(stderr, "\nhint: ") {
		t.Errorf("stderr = %q", stderr)
	}
}

// TestCatalogWithoutAKernelSaysHowToStartOne: catalog explains a kernel
// that is not running as serve does, with the command that starts one.
func TestCatalogWithoutAKernelSaysHowToStartOne(t *testing.T) {
	tempHome(t)
	sock := filepath.Join(shortTempDir(t), "k.sock")
	code, _, stderr := runCLI(t, "catalog", "--socket", sock, "--harness", "gemini")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := "sharedos-mcp: error: no kernel is running at " + sock + ": there is no socket\n" +
		"hint: start it with 'sharedos-mcp kernel --root DIR --socket " + sock + "', then run 'sharedos-mcp catalog' again\n"
	if !strings.HasPrefix(stderr, want) {
		t.Errorf("stderr = %q; want %q", stderr, want)
	}
}

func TestCatalogUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"all harnesses need an integration name", nil, "--integration is required with --harness all"},
		{"an unknown harness", []string{"--harness", "emacs"}, `unknown harness "emacs"`},
		{"a bad integration name", []string{"--integration", "a/b"}, `catalog: invalid integration name "a/b"`},
		{"a harness by another name", []string{"--harness", "gemini-cli"}, "hint: did you mean gemini?"},
		{"an argument", []string{"--integration", "x", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append([]string{"catalog"}, tc.args...)...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "\nhint: ") {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and %q with a hint", code, stdout, stderr, tc.want)
			}
		})
	}
}
