package hashing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func validDef(name string) Definition {
	return Definition{
		Name: name, Description: "does a thing", Namespace: "ns", Source: "sharedos", ReadWrite: "read",
		InputSchema: json.RawMessage(`{"type":"object"}`),
	}
}

func TestValidToolName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"letters, digits and the three punctuation marks", "files.read_2-x", true},
		{"a single character", "a", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"129 characters", strings.Repeat("a", 129), false},
		{"a space", "files read", false},
		{"a slash", "files/read", false},
		{"non-ASCII", "fichiers.lire.é", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidToolName(tt.in); got != tt.want {
				t.Errorf("ValidToolName(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestProjectRefuses(t *testing.T) {
	with := func(f func(d *Definition)) []Definition {
		d := validDef("x")
		f(&d)
		return []Definition{d}
	}
	many := make([]Definition, MaxTools+1)
	for i := range many {
		many[i] = validDef(fmt.Sprintf("t%d", i))
	}
	tests := []struct {
		name string
		defs []Definition
		want string
	}{
		{"an invalid name", with(func(d *Definition) { d.Name = "a b" }), `tool #0 (name "a b"): invalid name`},
		{"an empty name", with(func(d *Definition) { d.Name = "" }), `invalid name`},
		{"an empty description", with(func(d *Definition) { d.Description = "" }), `tool "x": description is empty`},
		{"a description over 8192 UTF-16 units", with(func(d *Definition) { d.Description = strings.Repeat("😀", 4097) }), `description is 8194 UTF-16 code units long`},
		{"a description that is not UTF-8", with(func(d *Definition) { d.Description = "\xff" }), `description is not valid UTF-8`},
		{"a namespace that is only whitespace", with(func(d *Definition) { d.Namespace = " \u3000\ufeff" }), `tool "x": namespace is empty`},
		{"a source over 256 units after the trim", with(func(d *Definition) { d.Source = " " + strings.Repeat("s", 257) }), `source is 257 UTF-16 code units long`},
		{"an unknown readWrite", with(func(d *Definition) { d.ReadWrite = "execute" }), `readWrite is "execute"`},
		{"a missing inputSchema", with(func(d *Definition) { d.InputSchema = nil }), `inputSchema is missing`},
		{"an inputSchema that is an array", with(func(d *Definition) { d.InputSchema = json.RawMessage(`[]`) }), `inputSchema is not a JSON object`},
		{"an inputSchema that is null", with(func(d *Definition) { d.InputSchema = json.RawMessage(`null`) }), `inputSchema is not a JSON object`},
		{"an inputSchema that is not JSON", with(func(d *Definition) { d.InputSchema = json.RawMessage(`{"a":}`) }), `inputSchema: invalid JSON at offset 5`},
		{"an inputSchema with an infinite number", with(func(d *Definition) { d.InputSchema = json.RawMessage(`{"maximum":1e999}`) }), `does not fit a double`},
		{"an inputSchema with trailing garbage", with(func(d *Definition) { d.InputSchema = json.RawMessage(`{} {}`) }), `inputSchema: invalid JSON at offset 3: unexpected '{' after the value`},
		{"an outputSchema that is a string", with(func(d *Definition) { d.OutputSchema = json.RawMessage(`"x"`) }), `outputSchema is not a JSON object`},
		{"a duplicate name", []Definition{validDef("b"), validDef("a"), validDef("b")}, `tool "b": duplicate name`},
		{"more than 512 tools", many, `catalogue has 513 tools: too many tools`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := Project(tt.defs)
			if err == nil {
				t.Fatalf("Project accepted the catalogue: %v", tools)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestProjectSentinels(t *testing.T) {
	_, err := Project([]Definition{validDef("a"), validDef("a")})
	if !errors.Is(err, ErrDuplicateName) {
		t.Errorf("duplicate: %v is not ErrDuplicateName", err)
	}
	_, err = ProjectRaw(make([]json.RawMessage, MaxTools+1))
	if !errors.Is(err, ErrTooManyTools) {
		t.Errorf("too many: %v is not ErrTooManyTools", err)
	}
}

func TestProjectAccepts(t *testing.T) {
	t.Run("exactly 512 tools", func(t *testing.T) {
		defs := make([]Definition, MaxTools)
		for i := range defs {
			defs[i] = validDef(fmt.Sprintf("t%03d", i))
		}
		if _, err := Project(defs); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("namespace and source trimmed of ECMAScript whitespace only", func(t *testing.T) {
		d := validDef("x")
		d.Namespace = "\ufeff\u00a0 ns\u2029\u3000"
		d.Source = "\u0085src" // NEL is not ECMAScript whitespace
		tools, err := Project([]Definition{d})
		if err != nil {
			t.Fatal(err)
		}
		if tools[0].Namespace != "ns" || tools[0].Source != "\u0085src" {
			t.Errorf("namespace %q, source %q; want \"ns\", \"\\u0085src\"", tools[0].Namespace, tools[0].Source)
		}
	})
	t.Run("a description of 8192 units with a lone surrogate", func(t *testing.T) {
		d := validDef("x")
		d.Description = strings.Repeat("a", 8191) + "\xed\xa0\x80"
		if _, err := Project([]Definition{d}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a null outputSchema is absent", func(t *testing.T) {
		d := validDef("x")
		d.OutputSchema = json.RawMessage(` null `)
		tools, err := Project([]Definition{d})
		if err != nil {
			t.Fatal(err)
		}
		if tools[0].OutputSchema != nil {
			t.Errorf("outputSchema = %s, want nil", tools[0].OutputSchema)
		}
	})
}

func TestProjectRawReadsOnlyNamedFields(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{
			"unknown fields are ignored, even when not representable",
			`{"name":"x","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{},"metadata":{"n":1e999},"requiredCapability":{"action":"read"}}`,
			`[{"annotations":{"readOnlyHint":true},"description":"d","inputSchema":{},"metadata":{"namespace":"n","source":"s"},"name":"x"}]`,
		},
		{
			"field names are case-sensitive",
			`{"name":"x","NAME":"y","Description":"no","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{}}`,
			`[{"annotations":{"readOnlyHint":true},"description":"d","inputSchema":{},"metadata":{"namespace":"n","source":"s"},"name":"x"}]`,
		},
		{
			"the last duplicate field wins",
			`{"name":"y","name":"x","description":"d","namespace":"n","source":"s","readWrite":"write","inputSchema":{},"annotations":{"destructive":true},"annotations":{"idempotent":false,"openWorld":true}}`,
			`[{"annotations":{"idempotentHint":false,"readOnlyHint":false},"description":"d","inputSchema":{},"metadata":{"namespace":"n","source":"s"},"name":"x"}]`,
		},
		{
			"null annotations and null hints are not stated",
			`{"name":"x","description":"d","namespace":"n","source":"s","readWrite":"write","inputSchema":{},"outputSchema":null,"annotations":{"readOnly":null,"destructive":null}}`,
			`[{"annotations":{"readOnlyHint":false},"description":"d","inputSchema":{},"metadata":{"namespace":"n","source":"s"},"name":"x"}]`,
		},
		{
			"escaped strings are decoded, a lone surrogate kept",
			`{"name":"\u0078","description":"\ud800\u00e9","namespace":"n","source":"s","readWrite":"read","inputSchema":{}}`,
			`[{"annotations":{"readOnlyHint":true},"description":"\ud800é","inputSchema":{},"metadata":{"namespace":"n","source":"s"},"name":"x"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := ProjectRaw([]json.RawMessage{json.RawMessage(tt.raw)})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(Canonical(tools)); got != tt.want {
				t.Errorf("canonical\n got: %s\nwant: %s", got, tt.want)
			}
		})
	}
}

func TestProjectRawRefuses(t *testing.T) {
	tests := []struct {
		name, raw, want string
	}{
		{"not an object", `[]`, `tool #0 (name ""): invalid JSON at offset 0: want an object`},
		{"a name that is not a string", `{"name":1}`, `name: want a string, have '1'`},
		{"a non-boolean hint", `{"name":"x","annotations":{"readOnly":"yes"}}`, `tool "x": annotations: annotations.readOnly: want a boolean`},
		{"trailing garbage", `{"name":"x"}}`, `after the definition`},
		{"invalid JSON in a skipped field", `{"name":"x","metadata":{"a":01}}`, `tool "x": invalid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ProjectRaw([]json.RawMessage{json.RawMessage(tt.raw)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestProjectRawErrorOrder: an unreadable definition is reported before
// an invalid tool that comes earlier, and of two invalid tools the first.
func TestProjectRawErrorOrder(t *testing.T) {
	valid := `{"name":"ok","description":"d","namespace":"n","source":"s","readWrite":"read","inputSchema":{}}`
	tests := []struct {
		name string
		raws []string
		want string
	}{
		{"unreadable after invalid", []string{`{"name":"a b"}`, valid, `{"name":"x",}`}, `tool "x": invalid JSON`},
		{"two invalid", []string{valid, `{"name":"y"}`, `{"name":"z"}`}, `tool "y": description is empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var raws []json.RawMessage
			for _, r := range tt.raws {
				raws = append(raws, json.RawMessage(r))
			}
			_, err := ProjectRaw(raws)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want one starting %q", err, tt.want)
			}
		})
	}
}

func TestUnmarshalJSONCopiesSchemas(t *testing.T) {
	data := []byte(`{"name":"x","inputSchema":{"type":"object"}}`)
	var d Definition
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = ' '
	}
	if string(d.InputSchema) != `{"type":"object"}` {
		t.Errorf("inputSchema = %q after the input was overwritten", d.InputSchema)
	}
}

func TestCanonicalSortsUnsortedTools(t *testing.T) {
	tools, err := Project([]Definition{validDef("a"), validDef("b")})
	if err != nil {
		t.Fatal(err)
	}
	reversed := []Tool{tools[1], tools[0]}
	if !bytes.Equal(Canonical(reversed), Canonical(tools)) {
		t.Error("Canonical depends on the order of its input")
	}
	if reversed[0].Name != "b" {
		t.Error("Canonical reordered its caller's slice")
	}
}

func TestAppendMCP(t *testing.T) {
	var vs []vector
	for _, v := range loadVectors(t) {
		if v.Name == "mixed-realistic-catalogue" || v.Name == "unicode-descriptions" || v.Name == "annotations-variants" {
			vs = append(vs, v)
		}
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			tools, err := ProjectRaw(v.Catalogue)
			if err != nil {
				t.Fatal(err)
			}
			var want []map[string]any
			if err := json.Unmarshal(v.ExpectedPublished, &want); err != nil {
				t.Fatal(err)
			}
			for i, tool := range tools {
				out := AppendMCP([]byte("prefix"), tool)
				if !bytes.HasPrefix(out, []byte("prefix")) {
					t.Fatalf("AppendMCP overwrote dst: %s", out)
				}
				out = out[len("prefix"):]
				if !json.Valid(out) {
					t.Fatalf("AppendMCP wrote invalid JSON: %s", out)
				}
				var got map[string]any
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatal(err)
				}
				w := want[i]
				meta := w["metadata"].(map[string]any)
				delete(w, "metadata")
				w["_meta"] = map[string]any{"sharedos/namespace": meta["namespace"], "sharedos/source": meta["source"]}
				gotJSON, _ := json.Marshal(got)
				wantJSON, _ := json.Marshal(w)
				if !bytes.Equal(gotJSON, wantJSON) {
					t.Errorf("tool %s\n got: %s\nwant: %s", tool.Name, gotJSON, wantJSON)
				}
				if !bytes.Contains(out, tool.InputSchema) {
					t.Errorf("inputSchema not copied in canonical form: %s", out)
				}
			}
		})
	}
}
