//go:build unix && !linux

package proc

import "time"

// groupHasLiveMember trusts kill(2): without /proc, zombies count as alive.
func groupHasLiveMember(pgid int) bool { return true }

// killTagged finds no process without /proc: a process that left the
// group is not found here.
func killTagged(string, time.Duration) bool { return true }

// ProtectSelf does nothing where /proc does not show a process's
// environment to its user's other processes.
func ProtectSelf(func(name, value string) bool) error { return nil }
