package install

import (
	"bytes"
	"fmt"
	"strings"
)

// diffContext is how many unchanged lines surround each change.
const diffContext = 3

// maxDiffCells bounds the quadratic part of Diff. Past it the changed
// region is shown as all of a removed, then all of b added: still a
// correct diff, only not a minimal one.
const maxDiffCells = 4 << 20

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
}

// Diff returns a unified-style diff of a and b, line by line, with
// fromName and toName in its header; "" when they are equal.
func Diff(fromName, toName string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	ops := diffLines(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: this change and every change within 2*context of the
		// previous one, with context on both sides.
		start := max(0, i-diffContext)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*diffContext {
				break
			}
		}
		end = min(len(ops), end+diffContext)
		writeHunk(&out, ops, start, end)
		i = end
	}
	return out.String()
}

func writeHunk(out *strings.Builder, ops []diffOp, start, end int) {
	aLine, bLine := 1, 1
	for _, op := range ops[:start] {
		if op.kind != '+' {
			aLine++
		}
		if op.kind != '-' {
			bLine++
		}
	}
	aCount, bCount := 0, 0
	for _, op := range ops[start:end] {
		if op.kind != '+' {
			aCount++
		}
		if op.kind != '-' {
			bCount++
		}
	}
	// An empty side names the line before the hunk, as diff -u does.
	if aCount == 0 {
		aLine--
	}
	if bCount == 0 {
		bLine--
	}
	fmt.Fprintf(out, "@@ -%d,%d +%d,%d @@\n", aLine, aCount, bLine, bCount)
	for _, op := range ops[start:end] {
		out.WriteByte(op.kind)
		out.WriteString(op.line)
		if !strings.HasSuffix(op.line, "\n") {
			out.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// splitLines splits after each newline; the last line may lack one.
func splitLines(b []byte) []string {
	var lines []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n') + 1
		if i == 0 {
			i = len(b)
		}
		lines = append(lines, string(b[:i]))
		b = b[i:]
	}
	return lines
}

// diffLines aligns a and b on a longest common subsequence of lines.
// Config edits touch one region, so the common prefix and suffix are
// peeled off first and the table is built for the middle only.
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for _, l := range a[:pre] {
		ops = append(ops, diffOp{' ', l})
	}
	ops = append(ops, lcsOps(a[pre:len(a)-suf], b[pre:len(b)-suf])...)
	for _, l := range a[len(a)-suf:] {
		ops = append(ops, diffOp{' ', l})
	}
	return ops
}

func lcsOps(a, b []string) []diffOp {
	var ops []diffOp
	if (len(a)+1)*(len(b)+1) > maxDiffCells {
		for _, l := range a {
			ops = append(ops, diffOp{'-', l})
		}
		for _, l := range b {
			ops = append(ops, diffOp{'+', l})
		}
		return ops
	}
	// n[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	n := make([]int, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				n[i*w+j] = n[(i+1)*w+j+1] + 1
			} else {
				n[i*w+j] = max(n[(i+1)*w+j], n[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i]})
			i, j = i+1, j+1
		case n[(i+1)*w+j] >= n[i*w+j+1]:
			ops = append(ops, diffOp{'-', a[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j]})
			j++
		}
	}
	for ; i < len(a); i++ {
		ops = append(ops, diffOp{'-', a[i]})
	}
	for ; j < len(b); j++ {
		ops = append(ops, diffOp{'+', b[j]})
	}
	return ops
}
