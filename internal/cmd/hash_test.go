package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos-mcp/hashing"
	"github.com/sharedos/sharedos-mcp/internal/cli"
)

const emptyCatalogHash = "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"

func runHashCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Run(context.Background(), cli.IO{In: strings.NewReader(stdin), Out: &out, Err: &errOut}, append([]string{"hash"}, args...))
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, data string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalogue.json")
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHashEmptyCatalogue(t *testing.T) {
	for _, args := range [][]string{{writeFile(t, "[]")}, {"-"}, {}} {
		code, out, errOut := runHashCmd(t, " [ ] ", args...)
		if code != 0 || out != emptyCatalogHash+"\n" || errOut != "" {
			t.Errorf("hash %q = %d, %q, %q; want 0, the empty catalogue's hash", args, code, out, errOut)
		}
	}
}

// hashVector is one of the catalogHash vectors shared with the
// reference implementation.
type hashVector struct {
	Name         string          `json:"name"`
	Catalogue    json.RawMessage `json:"catalogue"`
	ExpectedHash string          `json:"expectedHash"`
}

func hashVectors(t *testing.T) []hashVector {
	t.Helper()
	data, err := os.ReadFile("../../testdata/catalog-hash-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []hashVector
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	return vectors
}

func TestHashVector(t *testing.T) {
	for _, v := range hashVectors(t) {
		if v.Name != "mixed-realistic-catalogue" {
			continue
		}
		code, out, errOut := runHashCmd(t, "", writeFile(t, string(v.Catalogue)))
		if code != 0 || out != v.ExpectedHash+"\n" {
			t.Errorf("hash = %d, %q, %q; want 0, %q", code, out, errOut, v.ExpectedHash)
		}
		return
	}
	t.Fatal("vector mixed-realistic-catalogue not found")
}

func TestHashRefuses(t *testing.T) {
	tests := []struct {
		name       string
		stdin      string
		args       []string
		code       int
		wantStderr []string
	}{
		{
			"an object without tools", `{"tool":[]}`, nil, 1,
			[]string{"sharedos-mcp: error: read catalogue from stdin: want a JSON array of tool definitions, or a document with a tools array; have an object without one", "hint: the input must be a JSON array"},
		},
		{
			"neither an array nor an object", `"tools"`, nil, 1,
			[]string{"sharedos-mcp: error: read catalogue from stdin: want a JSON array of tool definitions, have a string"},
		},
		{
			"a definition with an invalid name", `[{"name":"no spaces","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{}}]`, nil, 1,
			[]string{`sharedos-mcp: error: project catalogue from stdin: tool #0 (name "no spaces"): invalid name`, "hint: fix the definition it names"},
		},
		{
			"a file that does not exist", "", []string{"/nonexistent/catalogue.json"}, 1,
			[]string{"sharedos-mcp: error: read catalogue: /nonexistent/catalogue.json: no such file or directory", "hint: give a readable file"},
		},
		{
			"two files", "", []string{"a.json", "b.json"}, 2,
			[]string{`sharedos-mcp: error: hash: unexpected argument "b.json"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runHashCmd(t, tt.stdin, tt.args...)
			if code != tt.code || out != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, out, tt.code)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr %q does not contain %q", errOut, want)
				}
			}
		})
	}
}

// TestHashReadsThePublishedCatalogue: the tools as serve publishes them
// (a tools/list result) hash to the catalogHash of the kernel-side
// definitions they came from, and a document whose tools no longer hash
// to the catalogHash it states is refused.
func TestHashReadsThePublishedCatalogue(t *testing.T) {
	for _, v := range hashVectors(t) {
		var raws []json.RawMessage
		if json.Unmarshal(v.Catalogue, &raws) != nil {
			continue // a vector of a refused catalogue
		}
		tools, err := hashing.ProjectRaw(raws)
		if err != nil {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			doc := []byte(`{"tools":[`)
			for i, tool := range tools {
				if i > 0 {
					doc = append(doc, ',')
				}
				doc = hashing.AppendMCP(doc, tool)
			}
			published := string(doc) + `],"_meta":{"sharedos/catalogHash":"` + v.ExpectedHash + `"}}`
			code, out, errOut := runHashCmd(t, published)
			if code != 0 || out != v.ExpectedHash+"\n" || errOut != "" {
				t.Errorf("hash of the published form = %d, %q, %q; want 0, %q", code, out, errOut, v.ExpectedHash)
			}
			if len(tools) == 0 {
				return
			}
			tampered := strings.Replace(published, `"readOnlyHint":`+strconv.FormatBool(tools[0].ReadOnlyHint), `"readOnlyHint":`+strconv.FormatBool(!tools[0].ReadOnlyHint), 1)
			code, out, errOut = runHashCmd(t, tampered)
			if code != 1 || len(out) != 65 || !strings.Contains(errOut, "hash to "+strings.TrimSpace(out)+", not to the catalogHash it states, "+v.ExpectedHash) {
				t.Errorf("hash of a tampered document = %d, %q, %q; want 1, its hash, and that it is not the one stated", code, out, errOut)
			}
		})
	}
}
