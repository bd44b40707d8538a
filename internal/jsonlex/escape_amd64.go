//go:build !purego

package jsonlex

import "golang.org/x/sys/cpu"

// haveBlocks reports whether escapeBlocks runs here: it needs SSSE3's
// byte shuffle and POPCNT, which every x86-64 processor since about 2008
// has and the Go toolchain's baseline does not assume.
var haveBlocks = cpu.X86.HasSSSE3 && cpu.X86.HasPOPCNT

// escapeBlocks escapes up to blocks 16-byte blocks of src into dst, as
// AppendEscapedASCII does, sixteen bytes at a time: a block without a
// stop is stored as it is, and a block with some is spread into two
// stores, each eight bytes of it with a backslash before every stop,
// through expand. It stops before a block with a byte at or above 0x80
// or a control character written as \u00xx, which its caller writes, and
// returns how many bytes of src it read and of dst it wrote. dst must
// have room for 32 bytes a block.
func escapeBlocks(dst, src *byte, blocks int) (read, written int) {
	return escapeBlocksSSSE3(dst, src, blocks, &expand)
}

//go:noescape
func escapeBlocksSSSE3(dst, src *byte, blocks int, expand *[256][16]byte) (read, written int)

// expand is how escapeBlocks spreads eight bytes with stops at the set
// bits of its index: for each output byte, the input byte to take (0 to
// 7), or 8, a backslash, before each stop; 0x80 (a zero byte) after the
// last, where the next store goes.
var expand = func() (t [256][16]byte) {
	for m := range t {
		p := 0
		for j := range 8 {
			if m>>j&1 != 0 {
				t[m][p] = 8
				p++
			}
			t[m][p] = byte(j)
			p++
		}
		for ; p < 16; p++ {
			t[m][p] = 0x80
		}
	}
	return t
}()
