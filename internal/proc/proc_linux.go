package proc

import (
	"bytes"
	"os"
	"strconv"
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
