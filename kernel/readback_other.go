//go:build !linux && !darwin

package kernel

import (
	"errors"
	"os"
)

// readBack is not available here: the kernel cannot learn where an open
// handle leads, so it refuses to serve files rather than authorize a
// path it did not open (openFilesRoot fails).
func readBack(*os.File) (string, bool, error) {
	return "", false, errors.ErrUnsupported
}
