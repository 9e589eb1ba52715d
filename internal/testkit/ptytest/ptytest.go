//go:build linux

// Package ptytest gives tests a pseudo-terminal, to prove what a process
// holding it as its controlling terminal can and cannot do (SEC-5).
package ptytest

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Open returns the terminal end of a new pseudo-terminal, opened without
// becoming the test's controlling terminal; both ends are closed with the
// test.
func Open(t testing.TB) *os.File {
	t.Helper()
	_, s := Pair(t)
	return s
}

// Pair returns both ends of a new pseudo-terminal: the master, which reads
// what is written to the terminal and writes what is typed at it, and the
// terminal, opened without becoming the test's controlling terminal; both
// are closed with the test.
func Pair(t testing.TB) (master, tty *os.File) {
	t.Helper()
	// Opened non-blocking and made files with os.NewFile, both ends are
	// in Go's poller: closing one ends a Read blocked on it, so a test's
	// reader goroutines can be stopped and waited for.
	open := func(path string) *os.File {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		f := os.NewFile(uintptr(fd), path)
		t.Cleanup(func() { f.Close() })
		return f
	}
	m := open("/dev/ptmx")
	var n int
	var err error
	ctl := func(fd uintptr) {
		if err = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); err == nil {
			n, err = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}
	if rc, cerr := m.SyscallConn(); cerr != nil {
		t.Fatal(cerr)
	} else if cerr := rc.Control(ctl); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatalf("no pseudo-terminals: %v", err)
	}
	return m, open(fmt.Sprintf("/dev/pts/%d", n))
}

// InQueue is how many bytes wait in tty's input, typed (or pushed with
// TIOCSTI) and not yet read.
func InQueue(t testing.TB, tty *os.File) int {
	t.Helper()
	n, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCINQ)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// AsControlling makes the command whose SysProcAttr is returned start in
// a session of its own with tty, its standard input, as its controlling
// terminal.
func AsControlling() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}
