//go:build !linux

package kernel

import "testing"

// The swap races need renameat2(RENAME_EXCHANGE), which only Linux has.

func needExchange(t *testing.T) {
	t.Helper()
	t.Skip("the swap races need renameat2 RENAME_EXCHANGE (Linux)")
}

func exchange(t *testing.T, _, _ string) { t.Fatal("no RENAME_EXCHANGE here") }
