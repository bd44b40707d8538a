//go:build !linux && !darwin

package files

import (
	"errors"
	"os"
)

// readBack is not available here: the kernel cannot learn where an open
// handle leads, so it refuses to serve files rather than authorize a
// path it did not open (OpenRoot fails).
func readBack(*os.File) (string, bool, error) {
	return "", false, errors.ErrUnsupported
}
