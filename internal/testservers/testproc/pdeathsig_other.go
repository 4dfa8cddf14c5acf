//go:build !linux

package testproc

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
