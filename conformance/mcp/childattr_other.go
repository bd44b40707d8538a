//go:build !linux

package main

import "syscall"

// childAttr has no parent-death signal outside Linux: there the bridge
// still stops when its stdin closes, and the kernel must be stopped by
// this program.
func childAttr() *syscall.SysProcAttr { return nil }
