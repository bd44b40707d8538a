package hashing

import (
	"sync"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"
)

// Object keys are ordered by CLDR root collation (docs/adr/0001). Building
// a sort key is by far the most expensive step of canonicalisation, while
// a catalogue repeats the same few hundred keys ("type", "properties",
// "description", …) thousands of times, so sort keys are cached per key
// string for the life of the process.

// maxCachedKeys bounds the cache: keys come from the kernel, and a kernel
// that publishes ever-new property names must not grow the shim without
// limit. Past the bound, keys are still computed, just not kept.
const maxCachedKeys = 1 << 16

var sortKeys = struct {
	sync.RWMutex
	m map[string]string
}{m: make(map[string]string)}

// collator is not safe for concurrent use; mu guards it and buf.
var collator = struct {
	sync.Mutex
	c   *collate.Collator
	buf collate.Buffer
}{c: collate.New(language.Und)}

// sortKey returns the root-collation sort key of k (WTF-8). Two keys
// compare as their sort keys compare bytewise; equal sort keys are a
// collation tie.
func sortKey(k []byte) string {
	sortKeys.RLock()
	sk, ok := sortKeys.m[string(k)] // no allocation for a map index
	sortKeys.RUnlock()
	if ok {
		return sk
	}
	collator.Lock()
	sk = string(collator.c.Key(&collator.buf, k))
	collator.buf.Reset()
	collator.Unlock()

	sortKeys.Lock()
	if len(sortKeys.m) < maxCachedKeys {
		sortKeys.m[string(k)] = sk
	}
	sortKeys.Unlock()
	return sk
}
