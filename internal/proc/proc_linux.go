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
	d, err := os.Open("/proc")
	if err != nil {
		return true
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return true
	}
	want := []byte(strconv.Itoa(pgid))
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// Format: pid (comm) state ppid pgrp ...; comm may contain anything,
		// so fields are counted from the last ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(stat[i+1:])
		if len(f) < 3 || !bytes.Equal(f[2], want) {
			continue
		}
		if s := f[0]; len(s) > 0 && (s[0] == 'Z' || s[0] == 'X') {
			continue
		}
		return true
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
		for _, pid := range procPids() {
			env, err := os.ReadFile("/proc/" + pid + "/environ")
			if err != nil || !hasEntry(env, want) || !alive(pid) {
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
func procPids() []string {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	pids := names[:0]
	for _, n := range names {
		if n != "" && n[0] >= '0' && n[0] <= '9' {
			pids = append(pids, n)
		}
	}
	return pids
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

// alive reports whether process pid exists and is not a zombie.
func alive(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return true
	}
	s := stat[i+2]
	return s != 'Z' && s != 'X'
}
