package compat

import "syscall"

// dieWithParent makes the kernel kill the child when this process dies,
// so a test binary killed by its timeout leaves no agent or client
// behind.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
