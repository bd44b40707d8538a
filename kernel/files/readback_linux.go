package files

import (
	"os"
	"strconv"
	"strings"
)

// readBack returns the path of the object f is open on, as the kernel
// knows it now: /proc/self/fd/N names the dentry the file was opened by,
// whatever has been renamed since. confirm is set when the path may not
// lead back to f: Linux appends " (deleted)" to a removed entry's path,
// and a file may really be named that way.
func readBack(f *os.File) (p string, confirm bool, err error) {
	err = withFD(f, func(fd int) error {
		var err error
		p, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		return err
	})
	return p, strings.HasSuffix(p, " (deleted)"), err
}
