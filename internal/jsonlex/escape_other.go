//go:build !amd64 || purego

package jsonlex

// haveBlocks is false where there is no escapeBlocks in assembly: the
// word loop of appendEscapedASCII does all the work.
const haveBlocks = false

func escapeBlocks(dst, src *byte, blocks int) (read, written int) {
	panic("jsonlex: escapeBlocks called without haveBlocks")
}
