package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

func TestHashVector(t *testing.T) {
	data, err := os.ReadFile("../../testdata/catalog-hash-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Name         string          `json:"name"`
		Catalogue    json.RawMessage `json:"catalogue"`
		ExpectedHash string          `json:"expectedHash"`
	}
	if err := json.Unmarshal(data, &vectors); err != nil {
		t.Fatal(err)
	}
	for _, v := range vectors {
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
			"input that is not a JSON array", `{"tools":[]}`, nil, 1,
			[]string{"sharedos-mcp: error: read catalogue from stdin:", "hint: the input must be a JSON array"},
		},
		{
			"a definition with an invalid name", `[{"name":"no spaces","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{}}]`, nil, 1,
			[]string{`sharedos-mcp: error: project catalogue from stdin: tool #0 (name "no spaces"): invalid name`, "hint: fix the definition it names"},
		},
		{
			"a file that does not exist", "", []string{"/nonexistent/catalogue.json"}, 1,
			[]string{"sharedos-mcp: error: read catalogue: open /nonexistent/catalogue.json:", "hint: give a readable file"},
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
