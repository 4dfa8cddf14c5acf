//go:build !linux

package compat

import "syscall"

// dieWithParent has no portable equivalent off Linux; children are
// stopped by their owners instead.
func dieWithParent(*syscall.SysProcAttr) {}
