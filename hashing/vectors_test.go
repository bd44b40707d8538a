package hashing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

type vector struct {
	Name              string            `json:"name"`
	Notes             string            `json:"notes"`
	Catalogue         []json.RawMessage `json:"catalogue"`
	ExpectedPublished json.RawMessage   `json:"expectedPublished"`
	ExpectedCanonical string            `json:"expectedCanonical"`
	ExpectedHash      string            `json:"expectedHash"`
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	data, err := os.ReadFile("../testdata/catalog-hash-vectors.json")
	if err != nil {
		tb.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(data, &vs); err != nil {
		tb.Fatal(err)
	}
	if len(vs) != 12 {
		tb.Fatalf("read %d vectors, want 12", len(vs))
	}
	return vs
}

// published renders tools the way the reference publishes them before
// hashing (metadata in place of _meta), through encoding/json, so that
// the comparison with expectedPublished does not trust Canonical.
func published(tb testing.TB, tools []Tool) any {
	tb.Helper()
	type annotations struct {
		ReadOnlyHint    bool  `json:"readOnlyHint"`
		DestructiveHint *bool `json:"destructiveHint,omitempty"`
		IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	}
	type metadata struct {
		Namespace string `json:"namespace"`
		Source    string `json:"source"`
	}
	type tool struct {
		Name         string          `json:"name"`
		Description  string          `json:"description"`
		InputSchema  json.RawMessage `json:"inputSchema"`
		OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
		Annotations  annotations     `json:"annotations"`
		Metadata     metadata        `json:"metadata"`
	}
	out := make([]tool, 0, len(tools))
	for _, t := range tools {
		out = append(out, tool{
			Name: t.Name, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema,
			Annotations: annotations{t.ReadOnlyHint, t.DestructiveHint, t.IdempotentHint},
			Metadata:    metadata{t.Namespace, t.Source},
		})
	}
	data, err := json.Marshal(out)
	if err != nil {
		tb.Fatal(err)
	}
	return decodeAny(tb, data)
}

func decodeAny(tb testing.TB, data []byte) any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("decode %s: %v", data, err)
	}
	return v
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			tools, err := ProjectRaw(v.Catalogue)
			if err != nil {
				t.Fatalf("ProjectRaw: %v", err)
			}
			if got, want := published(t, tools), decodeAny(t, v.ExpectedPublished); !reflect.DeepEqual(normalizeNumbers(t, got), normalizeNumbers(t, want)) {
				t.Errorf("published projection differs\n got: %v\nwant: %v", got, want)
			}
			if got := string(Canonical(tools)); got != v.ExpectedCanonical {
				t.Errorf("canonical form differs\n got: %s\nwant: %s", got, v.ExpectedCanonical)
			}
			if got := Hash(tools); got != v.ExpectedHash {
				t.Errorf("Hash = %s, want %s", got, v.ExpectedHash)
			}
		})
	}
}

// normalizeNumbers turns every json.Number into its float64 value, since
// the expected projection spells numbers as the reference's input did.
func normalizeNumbers(tb testing.TB, v any) any {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			tb.Fatalf("number %s: %v", v, err)
		}
		return f
	case []any:
		for i := range v {
			v[i] = normalizeNumbers(tb, v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = normalizeNumbers(tb, v[k])
		}
	}
	return v
}

func TestVectorsThroughDefinitions(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			var defs []Definition
			raw, _ := json.Marshal(v.Catalogue)
			if err := json.Unmarshal(raw, &defs); err != nil {
				t.Fatalf("unmarshal definitions: %v", err)
			}
			tools, err := Project(defs)
			if err != nil {
				t.Fatalf("Project: %v", err)
			}
			if got := Hash(tools); got != v.ExpectedHash {
				t.Errorf("Hash = %s, want %s", got, v.ExpectedHash)
			}
		})
	}
}

// TestLargeCatalogue checks the benchmark's catalogue, which is large
// enough for Hash to hash it in pieces, against Canonical and against the
// hash the implementation gave before it was tuned for speed.
func TestLargeCatalogue(t *testing.T) {
	tools, err := ProjectRaw(realisticCatalogue(MaxTools))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(Canonical(tools))
	got := Hash(tools)
	if want := hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Hash = %s, but Canonical hashes to %s", got, want)
	}
	if want := "9c95275a06ef5dd409a5ca02b670e31eb398c2a5722c1ad101512bbbb5a9888c"; got != want {
		t.Errorf("Hash = %s, want %s", got, want)
	}
}
