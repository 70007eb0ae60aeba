//go:build unix && !linux

package local

import "syscall"

func dieWithRunner(*syscall.SysProcAttr) {}
