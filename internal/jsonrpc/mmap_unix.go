//go:build unix

package jsonrpc

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// mapBuffer returns size bytes of fresh anonymous memory for r's buffer,
// or nil when it cannot be had. The kernel gives its pages only as they
// are first written, and already zero: unlike make, which zeroes memory
// the heap reuses, untouched capacity costs nothing, and the garbage
// collector neither scans it nor counts it toward its goal. It is
// unmapped once r is unreachable, when no line it read may be used any
// more (ReadLine's lines last until the next call; Take copies).
func mapBuffer(r *Reader, size int) []byte {
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	runtime.AddCleanup(r, func(b []byte) { unix.Munmap(b) }, b)
	return b
}
