package install

import (
	"bytes"

	"github.com/rogpeppe/go-internal/diff"
)

// Diff returns a unified diff of a and b, line by line, with fromName and
// toName in its header; "" when they are equal. It is an anchored diff
// (go-internal/diff): O(n log n) on any input, so a rewritten file of
// thousands of lines costs nothing to show. The "diff a b" line that
// package writes first is left out: the --- and +++ lines say it.
func Diff(fromName, toName string, a, b []byte) string {
	d := diff.Diff(fromName, a, toName, b)
	if i := bytes.IndexByte(d, '\n'); bytes.HasPrefix(d, []byte("diff ")) && i >= 0 {
		d = d[i+1:]
	}
	return string(d)
}
