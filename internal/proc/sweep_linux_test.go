package proc

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// ADP-1, PERF-3: processes ending together share their passes over /proc
// for escaped descendants. Callers that arrive while a pass runs are all
// served by one next pass, which starts after they called.
func TestADP1_EndingProcessesShareTheirSweeps(t *testing.T) {
	const callers = 8
	// A pass is running (this test's, once no other is): callers can only
	// register for the next one.
	for {
		sweeps.mu.Lock()
		if !sweeps.running && sweeps.next == nil {
			break
		}
		sweeps.mu.Unlock()
		runtime.Gosched()
	}
	sweeps.running = true
	sweeps.mu.Unlock()
	var wg sync.WaitGroup
	results := make([][]string, callers)
	for i := range callers {
		wg.Go(func() { results[i] = sweepTagged(fmt.Sprintf("%s=sweep-test-%d", TagEnv, i)) })
	}
	for {
		sweeps.mu.Lock()
		n := 0
		if sweeps.next != nil {
			n = len(sweeps.next.found)
		}
		if n >= callers {
			break
		}
		sweeps.mu.Unlock()
		runtime.Gosched()
	}
	before := sweepPasses.Load()
	sweeps.running = false
	sweeps.cond.Broadcast()
	sweeps.mu.Unlock()
	wg.Wait()
	if passes := sweepPasses.Load() - before; passes != 1 {
		t.Errorf("%d callers took %d passes, want 1", callers, passes)
	}
	for i, found := range results {
		if len(found) > 0 {
			t.Errorf("caller %d: processes %v with its (unused) tag were found", i, found)
		}
	}
}

// ADP-1: when several processes end at once, each one's escaped
// descendant is killed, though they share passes.
func TestADP1_EscapedDescendantsOfProcessesEndingTogether(t *testing.T) {
	const n = 6
	procs := make([]*Process, n)
	for i := range procs {
		procs[i] = startFake(t, context.Background(), fakeSpec(t, "leader-exit-escape", ""))
	}
	// They end on their own, together; each one's cleanup runs as it
	// ends, whatever order they are read in here.
	children := make([]int, n)
	for i, p := range procs {
		for line, err := range p.Lines() {
			if err == nil {
				if v := decodePids(t, line); v.Leader != 0 {
					children[i] = v.Child
				}
			}
		}
		within(t, hangBound, "Wait", p.Wait)
	}
	// Each was sent SIGKILL before its process's Wait returned; a killed
	// process may take a moment to be gone on a loaded machine, one left
	// alone sleeps for fakeLifetime.
	for i, child := range children {
		if child == 0 {
			t.Fatalf("process %d announced no grandchild", i)
		}
		t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
		waitUntil(t, hangBound, fmt.Sprintf("escaped grandchild %d of process %d to be gone", child, i),
			func() bool { return !pidAlive(child) })
	}
}
