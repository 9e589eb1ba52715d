//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Env is where one harness runs things: a scratch directory with a bin
// directory holding the fake under each vendor's command name, first on
// PATH (how drover's adapters find a vendor: docs/architecture.md), and a
// tag that marks every process it starts. Close stops anything left.
type Env struct {
	// Drover is the drover executable measured.
	Drover string
	// Fake is the executable that is the fake vendor CLI under a vendor's
	// name (this program, or a test binary).
	Fake string
	// FakeRole, when set, is given to the fake as RoleEnv (a test binary
	// is the fake only when told).
	FakeRole string

	dir, bin, tag string
	runs          int
}

// NewEnv prepares an Env in a new directory under dir ("" for the
// system's temporary directory).
func NewEnv(drover, fake, dir string) (*Env, error) {
	var err error
	if drover, err = filepath.Abs(drover); err != nil {
		return nil, err
	}
	if fake, err = filepath.Abs(fake); err != nil {
		return nil, err
	}
	for _, p := range []string{drover, fake} {
		if _, err := os.Stat(p); err != nil {
			return nil, err
		}
	}
	scratch, err := os.MkdirTemp(dir, "drover-bench-")
	if err != nil {
		return nil, err
	}
	tag := make([]byte, 8)
	_, _ = rand.Read(tag)
	e := &Env{Drover: drover, Fake: fake, dir: scratch, bin: filepath.Join(scratch, "bin"), tag: hex.EncodeToString(tag)}
	if err := os.Mkdir(e.bin, 0o755); err != nil {
		os.RemoveAll(scratch)
		return nil, err
	}
	for _, name := range vendorCommands {
		if err := os.Symlink(fake, filepath.Join(e.bin, name)); err != nil {
			os.RemoveAll(scratch)
			return nil, err
		}
	}
	return e, nil
}

// Close kills whatever process of this harness is still running (there
// should be none; the count is returned) and removes the scratch
// directory.
func (e *Env) Close() (leftovers int, err error) {
	leftovers = e.killLeftovers()
	return leftovers, os.RemoveAll(e.dir)
}

// sandbox is one run's own directories: a home, XDG directories, a
// working directory (the run's cwd, where the fake writes its stamp: it
// is inside a supervised run's write boundary) and a ledger.
type sandbox struct {
	root, home, work, db, stamp string
}

// newSandbox makes the directories of one run.
func (e *Env) newSandbox() (*sandbox, error) {
	e.runs++
	root := filepath.Join(e.dir, fmt.Sprintf("run%03d", e.runs))
	s := &sandbox{root: root, home: filepath.Join(root, "home"), work: filepath.Join(root, "work"),
		db: filepath.Join(root, "drover.db")}
	s.stamp = filepath.Join(s.work, "fake-stamp.json")
	for _, d := range []string{s.home, s.work, filepath.Join(root, "state"), filepath.Join(root, "config"),
		filepath.Join(root, "cache"), filepath.Join(root, "data"), filepath.Join(root, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// remove deletes the run's directories.
func (s *sandbox) remove() { os.RemoveAll(s.root) }

// environ is the whole environment of a process of run s: nothing of the
// user's but PATH (after the fake's bin directory) and the locale, so
// that no vendor configuration, DROVER_* variable or ledger of the user's
// is seen or touched.
func (e *Env) environ(s *sandbox, extra ...string) []string {
	env := []string{
		"PATH=" + e.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + s.home,
		"XDG_STATE_HOME=" + filepath.Join(s.root, "state"),
		"XDG_CONFIG_HOME=" + filepath.Join(s.root, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(s.root, "cache"),
		"XDG_DATA_HOME=" + filepath.Join(s.root, "data"),
		"TMPDIR=" + filepath.Join(s.root, "tmp"),
		"DROVER_LOG_LEVEL=error",
		TagEnv + "=" + e.tag,
		// A fake built with -race (a test binary) would sleep a second
		// at exit otherwise.
		"GORACE=atexit_sleep_ms=0",
	}
	for _, k := range []string{"LANG", "LC_ALL"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if e.FakeRole != "" {
		env = append(env, RoleEnv+"="+e.FakeRole)
	}
	return append(env, extra...)
}

// command is a process of this harness in a process group of its own,
// which is killed (SIGKILL) when ctx ends before it exits.
func command(ctx context.Context, env []string, dir, path string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, path, args...)
	c.Env, c.Dir = env, dir
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	c.WaitDelay = 5 * time.Second
	return c
}

// readStamp reads the fake's stamp.
func readStamp(path string) (Stamp, error) {
	var st Stamp
	b, err := os.ReadFile(path)
	if err != nil {
		return st, fmt.Errorf("the fake's stamp: %w", err)
	}
	return st, json.Unmarshal(b, &st)
}

// reading is what a reader of a process's stdout saw.
type reading struct {
	lines       int
	bytes       int64
	first, last int64          // Unix ns at which the first and last lines arrived
	types       map[string]int // lines by their "type" (UES events), when counted
	done        []byte         // the last line of type done
}

// readLines reads r to its end, line by line, timing the first and last
// line's arrival; with types, it counts lines by the value of a leading
// "type" member (every UES event starts with it) and keeps the done line.
// The same reading is applied to drover's output and to the floor's, so
// that both pay the same for being read.
func readLines(r io.Reader, types bool) (reading, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	rd := reading{}
	if types {
		rd.types = map[string]int{}
	}
	var long []byte
	prefix := []byte(`{"type":"`)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if len(long) > 0 {
			line = append(long, line...)
			long = long[:0]
		}
		if len(line) > 0 {
			now := time.Now().UnixNano()
			if rd.lines == 0 {
				rd.first = now
			}
			rd.last = now
			rd.lines++
			rd.bytes += int64(len(line))
			if types && bytes.HasPrefix(line, prefix) {
				rest := line[len(prefix):]
				if i := bytes.IndexByte(rest, '"'); i >= 0 {
					rd.types[string(rest[:i])]++
					if string(rest[:i]) == "done" {
						rd.done = append(rd.done[:0], line...)
					}
				}
			}
		}
		if err == io.EOF {
			return rd, nil
		}
		if err != nil {
			return rd, err
		}
	}
}

// doneStatus is the status of a done event line.
func doneStatus(line []byte) string {
	var ev struct {
		Payload struct {
			Status string `json:"status"`
		} `json:"payload"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return ""
	}
	return ev.Payload.Status
}

// maxRSS is a finished process's peak resident set in bytes, as wait4
// reported it: on Linux the larger of the process's own peak and that of
// any descendant it waited for (RUSAGE_BOTH semantics), not their sum.
// It also counts the peak of the memory the process replaced when it
// exec'd: Go starts a child sharing this harness's memory (vfork), so the
// harness's own peak is carried into the child's. resetPeakRSS before
// each start keeps that to the harness's current, small footprint.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}

// resetPeakRSS returns the harness's free memory to the system and resets
// its peak resident set to what it holds now (clear_refs 5, Linux 4.0+),
// so that a child started next does not inherit the peak of an earlier
// measurement (reading a 10 MB gemini result, say; see maxRSS): before
// this, a claude run measured right after a gemini run reported 57 MB,
// on its own 33 MB.
func resetPeakRSS() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// procStatus reads a field of /proc/PID/status in bytes (VmHWM, VmRSS).
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// procStat returns the fields of /proc/PID/stat after the command name
// (state, ppid, pgrp, …, utime and stime at 11 and 12).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// pid (comm) state …; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: %q: no command name", pid, b)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// alive reports whether pid is a live (not zombie) member of group pgid.
func alive(pid, pgid int) bool {
	f, err := procStat(pid)
	if err != nil || len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return false
	}
	g, _ := strconv.Atoi(f[2])
	return g == pgid
}

// killLeftovers kills every process that carries this harness's tag in
// its environment, but this one, and returns how many there were.
func (e *Env) killLeftovers() int {
	mark := []byte(TagEnv + "=" + e.tag + "\x00")
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		if f, err := procStat(pid); err == nil && len(f) > 0 && f[0] == "Z" {
			continue // dead, not yet reaped
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
