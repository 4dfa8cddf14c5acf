package compat

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts cmd in a process group of its own, killed whole
// when cmd's context ends: a client script's own children (kcat runs,
// python's and node's helpers) go with it.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
