// Package hashing computes catalogHash, the identity of the tool set a
// turn published, as CATALOG-HASH.md fixes it to the byte: the published
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
	"slices"
	"strings"
	"sync"
)

// Canonical returns the canonical serialisation of the published
// projection: the array of tools, each with its metadata {namespace,
// source}. Tools are put in name order if they are not already.
func Canonical(tools []Tool) []byte {
	return appendCanonical(nil, tools)
}

var hashBufs = sync.Pool{New: func() any { return new([]byte) }}

// Hash returns catalogHash: the SHA-256 of Canonical(tools) as 64
// lowercase hex characters.
func Hash(tools []Tool) string {
	buf := hashBufs.Get().(*[]byte)
	*buf = appendCanonical((*buf)[:0], tools)
	sum := sha256.Sum256(*buf)
	if cap(*buf) <= 4<<20 {
		hashBufs.Put(buf)
	}
	return hex.EncodeToString(sum[:])
}

func appendCanonical(dst []byte, tools []Tool) []byte {
	if !slices.IsSortedFunc(tools, compareNames) {
		tools = slices.Clone(tools)
		slices.SortFunc(tools, compareNames)
	}
	size := 2
	for i := range tools {
		t := &tools[i]
		size += 160 + len(t.Name) + len(t.Description) + len(t.InputSchema) + len(t.OutputSchema) + len(t.Namespace) + len(t.Source)
	}
	dst = slices.Grow(dst, size)
	dst = append(dst, '[')
	for i := range tools {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendCanonicalTool(dst, &tools[i])
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
