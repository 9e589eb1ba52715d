//go:build unix && !linux

package proc

// groupHasLiveMember trusts kill(2): without /proc, zombies count as alive.
func groupHasLiveMember(pgid int) bool { return true }
