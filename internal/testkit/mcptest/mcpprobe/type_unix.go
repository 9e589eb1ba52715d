//go:build unix

package main

import (
	"os"
	"syscall"
	"unsafe"
)

// typeIntoTerminal pushes text into the input of this process's
// controlling terminal, a key at a time (TIOCSTI).
func typeIntoTerminal(text string) error {
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer tty.Close()
	for i := range len(text) {
		b := text[i]
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), syscall.TIOCSTI, uintptr(unsafe.Pointer(&b))); errno != 0 {
			return errno
		}
	}
	return nil
}
