//go:build linux

package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc: Linux reports them in
// USER_HZ, 100 on every architecture Go runs Linux on.
const userHZ = 100

// cpuSample is one reading of a process's CPU time and of the machine's.
type cpuSample struct {
	proc  int64 // the process's user + system time, all threads, not its children
	busy  int64 // the machine's user, nice, system, irq and softirq time, all CPUs
	steal int64 // the machine's time taken by the hypervisor, all CPUs
	total int64 // the machine's time, all CPUs, busy or not
}

// sampleCPU reads pid's CPU time (/proc/PID/stat) and the machine's
// (/proc/stat), in ticks of 1/userHZ s.
func sampleCPU(pid int) (cpuSample, error) {
	var s cpuSample
	f, err := procStat(pid)
	if err != nil {
		return s, err
	}
	if len(f) < 13 {
		return s, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want utime and stime", pid, len(f))
	}
	for _, v := range f[11:13] { // utime, stime
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		s.proc += n
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	line, _, _ := bytes.Cut(st, []byte{'\n'})
	// cpu user nice system idle iowait irq softirq steal guest guest_nice;
	// guest time is counted in user already.
	f = strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return s, fmt.Errorf("/proc/stat: %q: not the cpu line", line)
	}
	for k, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/stat: %w", err)
		}
		s.total += n
		switch k {
		case 3, 4: // idle, iowait
		case 7:
			s.steal += n
		default:
			s.busy += n
		}
	}
	return s, nil
}

// cpuWindow is what a process and the machine spent between two samples.
type cpuWindow struct {
	// Cores is the process's CPU time over the window's length.
	Cores float64
	// Busy and Steal are the machine's busy and stolen shares of its
	// CPU time, %.
	Busy, Steal float64
	// Seconds is the window's length.
	Seconds float64
}

// measureCPU samples pid at from and at to and returns the difference; it
// returns false if done is closed before to, or a sample fails.
func measureCPU(done <-chan struct{}, pid int, from, to time.Time) (cpuWindow, bool) {
	wait := func(t time.Time) bool {
		timer := time.NewTimer(time.Until(t))
		defer timer.Stop()
		select {
		case <-timer.C:
			return true
		case <-done:
			return false
		}
	}
	if !wait(from) {
		return cpuWindow{}, false
	}
	a, err := sampleCPU(pid)
	at := time.Now()
	if err != nil || !wait(to) {
		return cpuWindow{}, false
	}
	b, err := sampleCPU(pid)
	secs := time.Since(at).Seconds()
	if err != nil || b.total <= a.total || secs <= 0 {
		return cpuWindow{}, false
	}
	total := float64(b.total - a.total)
	return cpuWindow{
		Cores:   float64(b.proc-a.proc) / userHZ / secs,
		Busy:    100 * float64(b.busy-a.busy) / total,
		Steal:   100 * float64(b.steal-a.steal) / total,
		Seconds: secs,
	}, true
}
