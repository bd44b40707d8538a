package main

import "syscall"

// childAttr makes Linux send SIGTERM to the kernel and the bridge if this
// program dies without stopping them.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
