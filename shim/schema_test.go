package shim

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/rogpeppe/go-internal/txtar"
)

// conformancePackage ships the official schema of each MCP revision
// (copied from the specification repository at a pinned commit).
// 0.2.0-alpha.12 is the first release that bundles 2026-07-28. The test
// reads it where .ci/run installs it (make conformance-mcp: npm ci
// --prefix conformance/mcp, pinned by its package-lock.json); no test
// reaches the npm registry.
const (
	conformancePackage = "@modelcontextprotocol/conformance"
	conformanceVersion = "0.2.0-alpha.12"
	conformanceDir     = "../conformance/mcp/node_modules/@modelcontextprotocol/conformance"
)

// schemaFor is the schema each protocol version is checked against. No
// package on the registry ships the 2024-11-05 schema; its messages are
// checked against 2025-03-26's, its successor, which the shim's
// 2024-11-05 answers must also satisfy (they differ only in
// protocolVersion).
var schemaFor = map[string]string{
	"2024-11-05": "2025-03-26",
	"2025-03-26": "2025-03-26",
	"2025-06-18": "2025-06-18",
	"2025-11-25": "2025-11-25",
	"2026-07-28": "2026-07-28",
}

// TestEveryMessageValidatesAgainstItsSchema checks every line the wire
// scripts show the shim writing against the official JSON schema of the
// protocol version it was written under: the result against the
// method's result type, the whole against the response, error or
// notification type.
func TestEveryMessageValidatesAgainstItsSchema(t *testing.T) {
	schemas := loadSchemas(t)
	files, err := filepath.Glob("testdata/wire/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no wire scripts: %v", err)
	}
	checked := 0
	for _, file := range files {
		ar, err := txtar.ParseFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var in, out []byte
		for _, f := range ar.Files {
			switch f.Name {
			case "in":
				in = f.Data
			case "out":
				out = f.Data
			}
		}
		reqs, tokens, session := servedAs(in)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line == "" {
				continue
			}
			line = strings.ReplaceAll(line, "$HASH", strings.Repeat("0", 64))
			for _, problem := range checkLine(schemas, reqs, tokens, session, line) {
				t.Errorf("%s: %s\n%.400s", filepath.Base(file), problem, line)
			}
			checked++
		}
	}
	t.Logf("%d lines checked against %d schemas", checked, len(schemas))
}

// served is how the shim served one request: its method, under which
// protocol version.
type served struct{ method, version string }

// servedAs replays a script's input as the shim reads it: each request's
// method and protocol version, by id (in order, for ids used twice), the
// version of each progress token's call, and the version the session was
// negotiated at, under which the shim sends requests of its own.
func servedAs(in []byte) (map[string][]served, map[string]string, string) {
	reqs := map[string][]served{}
	tokens := map[string]string{}
	negotiated := latestLegacy // what an unnegotiated session is served as
	add := func(raw json.RawMessage) {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || m["id"] == nil {
			return
		}
		var method string
		json.Unmarshal(m["method"], &method) // a bad one is answered -32600
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
			Meta            struct {
				Version string          `json:"io.modelcontextprotocol/protocolVersion"`
				Epoch   json.RawMessage `json:"sharedos/protocolVersion"`
				Token   json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal(m["params"], &p)
		version := negotiated
		if p.Meta.Version != "" {
			version = modernVersion // and answered -32022 if it is not
		} else if method == "initialize" && (p.Meta.Epoch == nil || string(p.Meta.Epoch) == `"2"`) {
			version = latestLegacy
			if legacyVersions[p.ProtocolVersion] {
				version = p.ProtocolVersion
			}
			negotiated = version
		}
		id := compact(m["id"])
		reqs[id] = append(reqs[id], served{method, version})
		if p.Meta.Token != nil {
			tokens[compact(p.Meta.Token)] = version
		}
	}
	for _, line := range strings.Split(string(in), "\n") {
		var batch []json.RawMessage
		if json.Unmarshal([]byte(line), &batch) == nil {
			for _, e := range batch {
				add(e)
			}
			continue
		}
		add(json.RawMessage(line))
	}
	return reqs, tokens, negotiated
}

// resultTypes names the result definition of each method the shim answers.
var resultTypes = map[string]string{
	"initialize":      "InitializeResult",
	"ping":            "EmptyResult",
	"tools/list":      "ListToolsResult",
	"tools/call":      "CallToolResult",
	"server/discover": "DiscoverResult",
}

// requestTypes names the definition of each request the shim sends the
// client (asking a person to approve a call, ADR 0040), and
// notificationTypes each notification besides progress (withdrawing that
// question).
var (
	requestTypes      = map[string]string{"elicitation/create": "ElicitRequest"}
	notificationTypes = map[string]string{"notifications/cancelled": "CancelledNotification"}
)

// checkLine returns what is wrong with one stdout line.
func checkLine(schemas map[string]*schemaDoc, reqs map[string][]served, tokens map[string]string, session, line string) []string {
	var batch []json.RawMessage
	if json.Unmarshal([]byte(line), &batch) == nil {
		var problems []string
		for _, e := range batch {
			problems = append(problems, checkMessage(schemas, reqs, tokens, session, e, true)...)
		}
		return problems
	}
	return checkMessage(schemas, reqs, tokens, session, json.RawMessage(line), false)
}

func checkMessage(schemas map[string]*schemaDoc, reqs map[string][]served, tokens map[string]string, session string, raw json.RawMessage, inBatch bool) []string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return []string{"not a JSON object"}
	}
	if _, ok := m["method"]; ok {
		var n struct {
			Method string `json:"method"`
			Params struct {
				Token json.RawMessage `json:"progressToken"`
			} `json:"params"`
		}
		json.Unmarshal(raw, &n)
		doc := schemas[schemaFor[session]]
		if _, isRequest := m["id"]; isRequest {
			def, ok := requestTypes[n.Method]
			if !ok {
				return []string{"a request the shim does not send: " + n.Method}
			}
			return append(doc.check(doc.first("JSONRPCRequest"), raw), doc.check(def, raw)...)
		}
		if n.Method != "notifications/progress" {
			def, ok := notificationTypes[n.Method]
			if !ok {
				return []string{"a notification the shim does not send: " + n.Method}
			}
			return doc.check(def, raw)
		}
		version, ok := tokens[compact(n.Params.Token)]
		if !ok {
			return []string{"a notification for no call's progress token"}
		}
		return schemas[schemaFor[version]].check("ProgressNotification", raw)
	}
	id := compact(m["id"])
	if id == "null" {
		// The request could not be read. JSON-RPC 2.0 answers it with a
		// null id; no MCP schema has that form (2025-11-25 and later make
		// the id optional instead), so the rest is checked without it.
		delete(m, "id")
		version := latestLegacy
		if inBatch {
			version = "2025-03-26"
		}
		without, _ := json.Marshal(m)
		doc := schemas[schemaFor[version]]
		if doc.has("JSONRPCErrorResponse") {
			return doc.check("JSONRPCErrorResponse", without)
		}
		return doc.checkAt("#/definitions/JSONRPCError/properties/error", m["error"])
	}
	list := reqs[id]
	if len(list) == 0 {
		return []string{"an answer to id " + id + ", which no request had"}
	}
	req := list[0]
	reqs[id] = list[1:]
	doc := schemas[schemaFor[req.version]]
	if _, isErr := m["error"]; isErr {
		return doc.check(doc.first("JSONRPCErrorResponse", "JSONRPCError"), raw)
	}
	problems := doc.check(doc.first("JSONRPCResultResponse", "JSONRPCResponse"), raw)
	if rt, ok := resultTypes[req.method]; ok {
		var r struct {
			ResultType string `json:"resultType"`
		}
		json.Unmarshal(m["result"], &r)
		if r.ResultType == "input_required" {
			// A call held for a person's approval in the 2026-07-28 era
			// (ADR 0040).
			rt = "InputRequiredResult"
		}
		for _, p := range doc.check(rt, m["result"]) {
			problems = append(problems, fmt.Sprintf("%s result (%s, %s): %s", req.method, req.version, rt, p))
		}
	}
	return problems
}

// schemaDoc is one revision's schema document, with a validator per
// definition made on first use.
type schemaDoc struct {
	raw      map[string]any
	defsKey  string
	resolved map[string]*jsonschema.Resolved
}

func (d *schemaDoc) has(def string) bool {
	defs, _ := d.raw[d.defsKey].(map[string]any)
	_, ok := defs[def]
	return ok
}

func (d *schemaDoc) first(defs ...string) string {
	for _, def := range defs {
		if d.has(def) {
			return def
		}
	}
	return defs[len(defs)-1]
}

func (d *schemaDoc) check(def string, instance json.RawMessage) []string {
	return d.checkAt("#/"+d.defsKey+"/"+def, instance)
}

// checkAt validates instance against the schema at ref, a JSON pointer
// into the document.
func (d *schemaDoc) checkAt(ref string, instance json.RawMessage) []string {
	rs, ok := d.resolved[ref]
	if !ok {
		root := map[string]any{}
		for k, v := range d.raw {
			root[k] = v
		}
		root["$ref"] = ref
		b, _ := json.Marshal(root)
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			return []string{"schema: " + err.Error()}
		}
		var err error
		if rs, err = s.Resolve(nil); err != nil {
			return []string{"resolve " + ref + ": " + err.Error()}
		}
		d.resolved[ref] = rs
	}
	var v any
	if err := json.Unmarshal(instance, &v); err != nil {
		return []string{err.Error()}
	}
	if err := rs.Validate(v); err != nil {
		return []string{ref + ": " + err.Error()}
	}
	return nil
}

// loadSchemas reads the schemas the conformance package bundles, from
// where .ci/run installs it, or skips the test when it or node is not
// there (outside CI).
func loadSchemas(t *testing.T) map[string]*schemaDoc {
	t.Helper()
	if testing.Short() {
		t.Skip("reads the MCP schemas out of an npm package, with node")
	}
	if _, err := exec.LookPath("node"); err != nil {
		needsNPM(t, "node is not installed: the official MCP schemas are read out of the npm package %s (CI has node)", conformancePackage)
	}
	b, err := os.ReadFile(filepath.Join(conformanceDir, "package.json"))
	if err != nil {
		needsNPM(t, "%s is not installed, so the official schemas are not at hand: run npm ci --prefix conformance/mcp, as .ci/run does (%v)", conformancePackage, err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != conformanceVersion {
		t.Fatalf("conformance/mcp installs %s %q, this test reads %s: pin them together (%v)", conformancePackage, pkg.Version, conformanceVersion, err)
	}
	dir := t.TempDir()
	extract, err := filepath.Abs("testdata/schema/extract.mjs")
	if err != nil {
		t.Fatal(err)
	}
	if outb, err := exec.Command("node", extract, filepath.Join(conformanceDir, "dist", "index.js"), dir).CombinedOutput(); err != nil {
		t.Fatalf("read the schemas out of %s: %v\n%s", conformancePackage, err, outb)
	}
	schemas := map[string]*schemaDoc{}
	for _, version := range schemaFor {
		if schemas[version] != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, version+".json"))
		if err != nil {
			t.Fatal(err)
		}
		d := &schemaDoc{resolved: map[string]*jsonschema.Resolved{}}
		if err := json.Unmarshal(b, &d.raw); err != nil {
			t.Fatalf("schema %s: %v", version, err)
		}
		d.defsKey = "$defs"
		if _, ok := d.raw["definitions"]; ok {
			d.defsKey = "definitions"
		}
		schemas[version] = d
	}
	return schemas
}

// needsNPM skips a test whose npm packages cannot be had, except in CI
// (CI=true), which installs them (.ci/run): there it fails, so a broken
// install cannot pass as a skip.
func needsNPM(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}
