package proc

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
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
// while the first is made.
func killTagged(tag string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	want := []byte(tag)
	for {
		found := false
		pids, _ := procPids()
		for _, pid := range pids {
			env, err := os.ReadFile("/proc/" + pid + "/environ")
			if err != nil || !hasEntry(env, want) || !running(procStat(pid)) {
				continue
			}
			found = true
			if n, err := strconv.Atoi(pid); err == nil {
				_ = syscall.Kill(n, syscall.SIGKILL)
			}
		}
		if !found {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
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

// hasEntry reports whether the NUL-separated environment env holds entry.
func hasEntry(env, entry []byte) bool {
	for e := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(e, entry) {
			return true
		}
	}
	return false
}
