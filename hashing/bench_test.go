package hashing

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
)

// realisticCatalogue returns n kernel definitions shaped like real MCP
// tools: a paragraph of description, a draft 2020-12 input schema with
// nested objects, arrays, enums, bounds and per-property descriptions,
// often an output schema, and the kernel-internal fields the projection
// must skip.
func realisticCatalogue(n int) []json.RawMessage {
	raws := make([]json.RawMessage, n)
	for i := range raws {
		output := ""
		if i%3 == 0 {
			output = `,"outputSchema":{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"id":{"type":"string"},"title":{"type":"string"},"updatedAt":{"type":"string","format":"date-time"},"score":{"type":"number","minimum":0,"maximum":1}},"required":["id","title"]}},"nextCursor":{"type":["string","null"]},"total":{"type":"integer","minimum":0}},"required":["items"]}`
		}
		pretty := fmt.Sprintf(`{
  "name": "ns%d.tool_%d",
  "description": "Search the records of integration %d for entries matching a query. Results are ordered by relevance; use the cursor to page through them. Read-only.",
  "namespace": "ns%d",
  "source": "mcp",
  "readWrite": "read",
  "inputSchema": {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
      "query": {"type": "string", "minLength": 1, "maxLength": 2048, "description": "Free-text query; quoted phrases match exactly."},
      "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "Most results to return."},
      "cursor": {"type": "string", "description": "Opaque cursor from a previous call."},
      "sortBy": {"enum": ["relevance", "updatedAt", "createdAt", "title"], "default": "relevance"},
      "filters": {
        "type": "object",
        "properties": {
          "owner": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
          "labels": {"type": "array", "items": {"type": "string", "maxLength": 64}, "maxItems": 20, "uniqueItems": true},
          "updatedAfter": {"type": "string", "format": "date-time"},
          "minScore": {"type": "number", "minimum": 0, "maximum": 1, "multipleOf": 0.01}
        },
        "additionalProperties": false
      },
      "includeArchived": {"type": "boolean", "default": false}
    },
    "required": ["query"],
    "additionalProperties": false
  }%s,
  "annotations": {"readOnly": true, "idempotent": true},
  "requiredCapability": {"resource": {"namespace": "ns%d", "path": ["records"], "owner": {"kind": "human", "userId": "user-alice"}}, "action": "search"},
  "metadata": {"vendor": "example", "version": "1.4.2"}
}`, i%40, i, i, i%40, output, i%40)
		// Definitions cross the kernel socket inside one JSON-RPC line, so
		// they arrive compact.
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(pretty)); err != nil {
			panic(err)
		}
		raws[i] = compact.Bytes()
	}
	return raws
}

func BenchmarkProjectHash512(b *testing.B) {
	raws := realisticCatalogue(MaxTools)
	size := 0
	for _, r := range raws {
		size += len(r)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		tools, err := ProjectRaw(raws)
		if err != nil {
			b.Fatal(err)
		}
		_ = Hash(tools)
	}
	tools, _ := ProjectRaw(raws)
	b.ReportMetric(float64(len(Canonical(tools))), "canonical-bytes")
}

func BenchmarkAppendMCP512(b *testing.B) {
	tools, err := ProjectRaw(realisticCatalogue(MaxTools))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = buf[:0]
		for _, t := range tools {
			buf = AppendMCP(buf, t)
		}
	}
}

// BenchmarkCanonicalJSON canonicalises one realistic definition, a
// pretty-printed one as an operator might write it.
func BenchmarkCanonicalJSON(b *testing.B) {
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, realisticCatalogue(1)[0], "", "  "); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(pretty.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CanonicalJSON(pretty.Bytes()); err != nil {
			b.Fatal(err)
		}
	}
}
