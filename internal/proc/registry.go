package proc

import (
	"sync"
	"syscall"
)

// live holds every Process of this program whose group has not yet had its
// final SIGKILL, for KillAll.
var live struct {
	sync.Mutex
	set map[*Process]struct{}
}

func register(p *Process) {
	live.Lock()
	defer live.Unlock()
	if live.set == nil {
		live.set = map[*Process]struct{}{}
	}
	live.set[p] = struct{}{}
}

func unregister(p *Process) {
	live.Lock()
	defer live.Unlock()
	delete(live.set, p)
}

// KillAll sends SIGKILL at once to the process group of every Process this
// program started that is still running, skipping their grace periods, and
// returns how many groups it signalled. Each Process then ends as usual
// (Wait returns, Lines ends). It is the escalation of a second Ctrl-C.
func KillAll() int {
	live.Lock()
	defer live.Unlock()
	n := 0
	for p := range live.set {
		p.requestStop(0)
		if signalGroup(p.pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
