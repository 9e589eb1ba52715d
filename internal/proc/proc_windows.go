package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

var errWindows = fmt.Errorf("process groups are not supported on windows: %w", errors.ErrUnsupported)

func setProcessGroup(*exec.Cmd) error { return errWindows }

func signalGroup(int, syscall.Signal) error { return errWindows }

func exitStatus(st *os.ProcessState) (int, string) { return st.ExitCode(), "" }

// KillGroup is not supported on Windows and always returns an error.
func KillGroup(pgid int) error {
	return fmt.Errorf("proc: kill process group %d: %w", pgid, errWindows)
}

// GroupAlive is not supported on Windows and always reports false.
func GroupAlive(int) bool { return false }

func killTagged(string, time.Duration) bool { return true }

// ProtectSelf does nothing on Windows.
func ProtectSelf(func(name, value string) bool) error { return nil }
