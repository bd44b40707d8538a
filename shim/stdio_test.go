package shim

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestServeStdioPacesTheCollector: serve runs the collector at GOGC 25,
// which keeps its heap near what a large payload holds, unless the user
// set GOGC, which is then left as the runtime read it.
func TestServeStdioPacesTheCollector(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	noKernel := func(context.Context) (Config, error) { return Config{}, errors.New("no kernel") }
	for _, tt := range []struct {
		name, gogc string // "" for GOGC unset
		want       int
	}{
		{"GOGC unset", "", gcPercent},
		{"GOGC set", "100", 100},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GOGC", tt.gogc)
			if tt.gogc == "" {
				os.Unsetenv("GOGC")
			}
			debug.SetGCPercent(100) // what the runtime read from GOGC=100, or its default
			if err := ServeStdio(context.Background(), noKernel, strings.NewReader(""), io.Discard); err == nil {
				t.Fatal("ServeStdio without a kernel returned nil")
			}
			if got := debug.SetGCPercent(100); got != tt.want {
				t.Errorf("GOGC %d after ServeStdio, want %d", got, tt.want)
			}
		})
	}
}
