package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// groupHasLiveMember scans /proc for a process of group pgid that is not a
// zombie. If /proc cannot be read it assumes a member is alive, the answer
// kill(2) already gave.
func groupHasLiveMember(pgid int) bool {
	pids, err := procPids()
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, pid := range pids {
		if f := procStat(pid); len(f) >= 3 && bytes.Equal(f[2], want) && running(f) {
			return true
		}
	}
	return false
}

// killTagged sends SIGKILL to every live process whose environment holds
// tag (a "KEY=VALUE" entry), and waits until none is left or d elapses;
// it reports whether none is left. Several passes: a process may fork
// while the first is made. A process killed is waited for by its pid: as
// it exits its environment reads empty before it is gone.
func killTagged(tag string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	var killed []string
	for {
		killed = append(killed, sweepTagged(tag)...)
		killed = slices.DeleteFunc(killed, func(pid string) bool { return !running(procStat(pid)) })
		if len(killed) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sweeps shares killTagged's passes over /proc between the processes that
// end at once. A pass reads every process's environment (~7 µs each here),
// and each ending process needs one: when a server's 200 runs ended within
// two seconds, 200 passes over its ~300 processes filled both cores, and
// the events of the runs still streaming waited 100–300 ms
// (serve's p99 was decided there). A caller registers its tag for the next
// pass; one of the callers registered for it runs it, for every tag at
// once, as soon as no pass is running, and the others wait for it. So at
// most one pass runs at a time, each serves every tag registered while
// the one before ran, and each caller runs at most its own pass.
var sweeps struct {
	mu      sync.Mutex
	cond    *sync.Cond
	next    *sweep // the pass tags are registered for; nil when none is
	running bool
}

// sweep is one pass over /proc: the tags it looks for and the live
// processes it found carrying each (and killed).
type sweep struct {
	found map[string][]string // tag → pids
	over  bool
}

func init() { sweeps.cond = sync.NewCond(&sweeps.mu) }

// sweepPasses counts the passes made (for tests).
var sweepPasses atomic.Int64

// sweepTagged makes one pass over /proc that starts after it is called,
// sending SIGKILL to the live processes that carry tag, and returns their
// pids.
func sweepTagged(tag string) []string {
	sweeps.mu.Lock()
	defer sweeps.mu.Unlock()
	if sweeps.next == nil {
		sweeps.next = &sweep{found: map[string][]string{}}
	}
	sw := sweeps.next
	sw.found[tag] = nil
	for !sw.over {
		if sweeps.running || sweeps.next != sw {
			sweeps.cond.Wait()
			continue
		}
		sweeps.running, sweeps.next = true, nil
		sweeps.mu.Unlock()
		killAllTagged(sw.found)
		sweeps.mu.Lock()
		sweeps.running, sw.over = false, true
		sweeps.cond.Broadcast()
	}
	return sw.found[tag]
}

// killAllTagged sends SIGKILL to every live process whose environment holds
// one of found's tags, and adds its pid to found[tag] for each.
func killAllTagged(found map[string][]string) {
	sweepPasses.Add(1)
	pids, _ := procPids()
	for _, pid := range pids {
		env, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			continue
		}
		// A process may carry several tags (one started by a run's
		// process that is itself a drover): it counts for each.
		var tags []string
		for e := range bytes.SplitSeq(env, []byte{0}) {
			if _, ok := found[string(e)]; ok {
				tags = append(tags, string(e))
			}
		}
		if len(tags) == 0 || !running(procStat(pid)) {
			continue
		}
		for _, tag := range tags {
			found[tag] = append(found[tag], pid)
		}
		if n, err := strconv.Atoi(pid); err == nil {
			_ = syscall.Kill(n, syscall.SIGKILL)
		}
	}
}

// procPids lists the pids in /proc.
func procPids() ([]string, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	pids := names[:0]
	for _, n := range names {
		if n != "" && n[0] >= '0' && n[0] <= '9' {
			pids = append(pids, n)
		}
	}
	return pids, nil
}

// procStat returns the fields of /proc/pid/stat after the command name
// (state, ppid, pgrp, …), nil if the process is gone. The name may contain
// anything, so fields are counted from the last ')'.
func procStat(pid string) [][]byte {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	return bytes.Fields(stat[i+1:])
}

// running reports whether stat fields (procStat) are of a process that is
// neither gone nor a zombie.
func running(f [][]byte) bool {
	return len(f) > 0 && len(f[0]) > 0 && f[0][0] != 'Z' && f[0][0] != 'X'
}

// ProtectSelf keeps what this process holds from the agents it starts
// (SEC-5). It makes the process not dumpable, so that processes of the
// same user without CAP_SYS_PTRACE — agents, contained or not — can
// neither read its /proc/<pid>/environ, mem or fd nor attach to it; a
// program it starts is dumpable again once it execs. And since a process
// with CAP_SYS_PTRACE (an agent of a drover run as root) reads any
// process's environ, it blanks the variables hide names in the environment
// block the kernel shows there; the process's own copy (os.Getenv) is
// untouched. It costs core dumps of drover itself.
func ProtectSelf(hide func(name, value string) bool) error {
	// Blanked first: once not dumpable, /proc/self/mem belongs to root.
	err := blankEnviron(hide)
	return errors.Join(err, unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0))
}

// blankEnviron overwrites with NULs, in the environment block at the top
// of this process's stack (what /proc/self/environ shows), each variable
// hide names. Go copied the block at start-up, so nothing reads it again.
func blankEnviron(hide func(name, value string) bool) error {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// The fields after the command name, which may hold spaces; env_start
	// and env_end are the 50th and 51st fields, 47th and 48th of these.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 49 {
		return errors.New("/proc/self/stat: no env_start and env_end")
	}
	start, err1 := strconv.ParseInt(f[47], 10, 64)
	end, err2 := strconv.ParseInt(f[48], 10, 64)
	if err := errors.Join(err1, err2); err != nil || end <= start {
		return fmt.Errorf("/proc/self/stat: env_start %s, env_end %s", f[47], f[48])
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, start); err != nil {
		return err
	}
	changed := false
	for i := 0; i < len(block); {
		n := bytes.IndexByte(block[i:], 0)
		if n < 0 {
			n = len(block) - i
		}
		if name, value, ok := strings.Cut(string(block[i:i+n]), "="); ok && hide(name, value) {
			clear(block[i : i+n])
			changed = true
		}
		i += n + 1
	}
	if !changed {
		return nil
	}
	_, err = mem.WriteAt(block, start)
	return err
}
