// Package hashing computes catalogHash, the identity of the tool set a
// turn published, as docs/catalog-hash.md fixes it to the byte: the published
// projection of each kernel definition, sorted by name, serialised
// canonically (object keys in CLDR root collation order, strings and
// numbers as ECMAScript writes them), hashed with SHA-256. It must agree
// with the SharedOS TypeScript reference on every catalogue, so each rule
// here mirrors what that implementation does, down to JSON.parse's
// treatment of duplicate keys.
//
// The package is pure: no I/O, no logging.
package hashing

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"slices"
	"strings"
	"sync"
)

// Canonical returns the canonical serialisation of the published
// projection: the array of tools, each with its metadata {namespace,
// source}. Tools are put in name order if they are not already.
func Canonical(tools []Tool) []byte {
	tools = byName(tools)
	size := 2
	for i := range tools {
		t := &tools[i]
		size += 160 + len(t.Name) + len(t.Description) + len(t.InputSchema) + len(t.OutputSchema) + len(t.Namespace) + len(t.Source)
	}
	return appendCanonical(make([]byte, 0, size), tools, nil)
}

// hashChunk is how much canonical text Hash gathers before handing it to
// SHA-256. The whole text of a large catalogue is most of a megabyte, and
// in a freshly started process every page of a buffer that size is a
// page fault; a small buffer reused tool after tool stays in cache.
const hashChunk = 16 << 10

// hashBufs holds Hash's buffers, made big enough for a chunk and the tool
// that completes it, so that a first Hash does not grow one by doubling.
var hashBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2*hashChunk); return &b }}

// Hash returns catalogHash: the SHA-256 of Canonical(tools) as 64
// lowercase hex characters.
func Hash(tools []Tool) string {
	h := sha256.New()
	buf := hashBufs.Get().(*[]byte)
	*buf = appendCanonical((*buf)[:0], byName(tools), h)
	h.Write(*buf)
	if cap(*buf) <= 4*hashChunk {
		hashBufs.Put(buf)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// byName returns tools in name order, sorting a copy if they are not.
func byName(tools []Tool) []Tool {
	if !slices.IsSortedFunc(tools, compareNames) {
		tools = slices.Clone(tools)
		slices.SortFunc(tools, compareNames)
	}
	return tools
}

// appendCanonical appends the canonical serialisation of tools, which are
// in name order, to dst. Given h, it hands the text to h whenever
// hashChunk of it has gathered, and returns only what is left.
func appendCanonical(dst []byte, tools []Tool, h hash.Hash) []byte {
	dst = append(dst, '[')
	for i := range tools {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCanonicalTool(dst, &tools[i])
		if h != nil && len(dst) >= hashChunk {
			h.Write(dst)
			dst = dst[:0]
		}
	}
	return append(dst, ']')
}

func compareNames(a, b Tool) int { return strings.Compare(a.Name, b.Name) }

// appendCanonicalTool writes one tool. Its keys are fixed, so their
// collation order is written out here rather than computed; a test checks
// it against the collator.
func appendCanonicalTool(dst []byte, t *Tool) []byte {
	dst = append(dst, `{"annotations":{`...)
	if t.DestructiveHint != nil {
		dst = append(dst, `"destructiveHint":`...)
		dst = appendBool(dst, *t.DestructiveHint)
		dst = append(dst, ',')
	}
	if t.IdempotentHint != nil {
		dst = append(dst, `"idempotentHint":`...)
		dst = appendBool(dst, *t.IdempotentHint)
		dst = append(dst, ',')
	}
	dst = append(dst, `"readOnlyHint":`...)
	dst = appendBool(dst, t.ReadOnlyHint)
	dst = append(dst, `},"description":`...)
	dst = appendQuoted(dst, t.Description)
	dst = append(dst, `,"inputSchema":`...)
	dst = append(dst, t.InputSchema...)
	dst = append(dst, `,"metadata":{"namespace":`...)
	dst = appendQuoted(dst, t.Namespace)
	dst = append(dst, `,"source":`...)
	dst = appendQuoted(dst, t.Source)
	dst = append(dst, `},"name":`...)
	dst = appendQuoted(dst, t.Name)
	if t.OutputSchema != nil {
		dst = append(dst, `,"outputSchema":`...)
		dst = append(dst, t.OutputSchema...)
	}
	return append(dst, '}')
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

// AppendMCP appends t as an MCP tools/list entry: the same projection
// Canonical hashes, with metadata carried in _meta as
// "sharedos/namespace" and "sharedos/source". Keys are in the order MCP
// documents them; the schemas are copied in their canonical form.
func AppendMCP(dst []byte, t Tool) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendQuoted(dst, t.Name)
	dst = append(dst, `,"description":`...)
	dst = appendQuoted(dst, t.Description)
	dst = append(dst, `,"inputSchema":`...)
	dst = append(dst, t.InputSchema...)
	if t.OutputSchema != nil {
		dst = append(dst, `,"outputSchema":`...)
		dst = append(dst, t.OutputSchema...)
	}
	dst = append(dst, `,"annotations":{"readOnlyHint":`...)
	dst = appendBool(dst, t.ReadOnlyHint)
	if t.DestructiveHint != nil {
		dst = append(dst, `,"destructiveHint":`...)
		dst = appendBool(dst, *t.DestructiveHint)
	}
	if t.IdempotentHint != nil {
		dst = append(dst, `,"idempotentHint":`...)
		dst = appendBool(dst, *t.IdempotentHint)
	}
	dst = append(dst, `},"_meta":{"sharedos/namespace":`...)
	dst = appendQuoted(dst, t.Namespace)
	dst = append(dst, `,"sharedos/source":`...)
	dst = appendQuoted(dst, t.Source)
	return append(dst, `}}`...)
}
