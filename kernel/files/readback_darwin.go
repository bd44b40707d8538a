package files

import (
	"bytes"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pathBufs hold F_GETPATH's answers. A buffer from the heap never moves,
// so its address can be passed to fcntl as an integer.
var pathBufs = sync.Pool{New: func() any { return new([unix.PathMax]byte) }}

// readBack returns the path of the object f is open on, from
// fcntl(F_GETPATH). macOS may name any of a file's names, or one that was
// removed, so the caller must always confirm that the path leads back.
func readBack(f *os.File) (p string, confirm bool, err error) {
	buf := pathBufs.Get().(*[unix.PathMax]byte)
	defer pathBufs.Put(buf)
	err = withFD(f, func(fd int) error {
		_, err := unix.FcntlInt(uintptr(fd), unix.F_GETPATH, int(uintptr(unsafe.Pointer(&buf[0]))))
		return err
	})
	runtime.KeepAlive(buf)
	if err != nil {
		return "", true, err
	}
	n := bytes.IndexByte(buf[:], 0)
	if n < 0 {
		n = len(buf)
	}
	return string(buf[:n]), true, nil
}
