//go:build unix

package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup puts the child in a new session, and so in a new process
// group whose id is its pid. A new session, not only a group: the child
// and everything it starts have no controlling terminal, so none of them
// can open /dev/tty, push keystrokes into drover's terminal (TIOCSTI) or
// be stopped by its job control; a person's answers reach an agent only
// through drover (SEC-5).
// Pdeathsig is deliberately not used: it fires when the forking *thread*
// exits, which in Go can be any thread, and it only covers the leader
// anyway. Group kills, plus KillGroup for groups a dead drover left behind,
// cover every member instead.
func setProcessGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return nil
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 1 {
		return fmt.Errorf("invalid process group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func exitStatus(st *os.ProcessState) (code int, signal string) {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -1, ws.Signal().String()
	}
	return st.ExitCode(), ""
}

// KillGroup sends SIGKILL to every process in process group pgid. It returns
// nil if the group no longer exists (ESRCH). It refuses pgid <= 1 and the
// caller's own process group, which a stale record could otherwise name.
// Meant for reaping groups recorded by a drover that died.
func KillGroup(pgid int) error {
	if pgid <= 1 {
		return fmt.Errorf("proc: refusing to kill process group %d", pgid)
	}
	if pgid == syscall.Getpgrp() {
		return fmt.Errorf("proc: refusing to kill own process group %d", pgid)
	}
	if err := signalGroup(pgid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("proc: kill process group %d: %w", pgid, err)
	}
	return nil
}

// GroupAlive reports whether any process of group pgid is alive, as probed
// by kill(-pgid, 0). Zombies (exited, not yet reaped by their parent) are
// not alive: on Linux a positive probe is confirmed against /proc. It
// reports false for pgid <= 1.
func GroupAlive(pgid int) bool {
	if pgid <= 1 {
		return false
	}
	err := syscall.Kill(-pgid, 0)
	if errors.Is(err, syscall.ESRCH) {
		return false
	}
	// Any other outcome (success, or EPERM for members owned by another
	// user) means the group has members; they may all be zombies, though,
	// e.g. orphans waiting for an init that reaps slowly.
	return groupHasLiveMember(pgid)
}
