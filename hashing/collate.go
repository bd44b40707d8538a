package hashing

import (
	"cmp"
	"sync"
	"unicode/utf8"

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

// collator is not safe for concurrent use; mu guards it and buf. It is
// built on first use: keys are nearly always ASCII (see asciiCompare), and
// building it touches the collation tables, which a serve that only
// answers initialize should not pay for.
var collator struct {
	sync.Mutex
	c   *collate.Collator
	buf collate.Buffer
}

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
	if collator.c == nil {
		collator.c = collate.New(language.Und)
	}
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

// Nearly every key in a real schema is ASCII, and for ASCII root
// collation reduces to two lookups a byte: each character is one
// collation element, control characters other than \t\n\v\f\r are
// ignorable, and every other character has the common secondary weight,
// so keys compare by their primary weights and then by their tertiary
// (case) weights. asciiCompare does that without a sort key, a lock or a
// map lookup. TestASCIICompare checks it against the collator's sort keys
// for every key of up to two characters.
var asciiPrimary, asciiTertiary [utf8.RuneSelf]uint8 // primary 0: ignorable

// asciiOrder lists the non-ignorable ASCII characters by root-collation
// primary weight, lowest first; an upper-case letter shares its
// lower-case letter's primary and sorts after it on the tertiary level.
const asciiOrder = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"

func init() {
	for i := range len(asciiOrder) {
		c := asciiOrder[i]
		asciiPrimary[c] = uint8(i + 1)
		if 'a' <= c && c <= 'z' {
			asciiPrimary[c-'a'+'A'], asciiTertiary[c-'a'+'A'] = uint8(i+1), 1
		}
	}
}

// asciiCompare compares two ASCII keys as their sort keys compare.
func asciiCompare(a, b []byte) int {
	i, j := 0, 0
	for {
		for i < len(a) && asciiPrimary[a[i]] == 0 {
			i++
		}
		for j < len(b) && asciiPrimary[b[j]] == 0 {
			j++
		}
		if i == len(a) || j == len(b) {
			break
		}
		if pa, pb := asciiPrimary[a[i]], asciiPrimary[b[j]]; pa != pb {
			return cmp.Compare(pa, pb)
		}
		i, j = i+1, j+1
	}
	switch {
	case i < len(a):
		return 1
	case j < len(b):
		return -1
	}
	// Equal primaries: the non-ignorable characters pair up one to one.
	i, j = 0, 0
	for {
		for i < len(a) && asciiPrimary[a[i]] == 0 {
			i++
		}
		for j < len(b) && asciiPrimary[b[j]] == 0 {
			j++
		}
		if i == len(a) {
			return 0
		}
		if ta, tb := asciiTertiary[a[i]], asciiTertiary[b[j]]; ta != tb {
			return cmp.Compare(ta, tb)
		}
		i, j = i+1, j+1
	}
}

// asciiPrefix packs the primary weights of the first eight non-ignorable
// characters of an ASCII key into an integer that orders as the key's
// primary weights do: differing prefixes decide a comparison without
// asciiCompare, and most schema keys differ within eight characters.
func asciiPrefix(k []byte) uint64 {
	var p uint64
	n := 0
	for _, b := range k {
		if w := asciiPrimary[b]; w != 0 {
			p |= uint64(w) << (56 - 8*n)
			if n++; n == 8 {
				break
			}
		}
	}
	return p
}
