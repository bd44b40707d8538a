// Package host says what the measuring programs report of the machine
// they ran on.
package host

import (
	"os"
	"strings"
)

// LoadAvg is the 1, 5 and 15 minute load averages, as /proc/loadavg
// has them, or "unknown".
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
