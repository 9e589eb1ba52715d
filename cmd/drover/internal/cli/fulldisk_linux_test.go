package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// smallDisk mounts a tmpfs of size (mount's size= option) for the test,
// unmounted when it ends; the test is skipped where mounting is not
// permitted (not root, no CAP_SYS_ADMIN).
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("needs to mount a small tmpfs (root; scripts/test runs as root): %v", err)
	}
	// Detached: a drover the test failed to stop cannot keep it busy.
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// fill writes a file in dir until its file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "fill")
	if err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	if f == nil {
		return // already full
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// unfill removes what fill wrote in dir.
func unfill(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "fill*"))
	for _, f := range files {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
}

// exitWithin waits for the drover cmd to exit, draining stdout (next),
// and returns its exit status; after d it kills drover and fails the test.
func exitWithin(t *testing.T, cmd *exec.Cmd, next func() bool, d time.Duration) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() {
		for next() {
		}
		exited <- cmd.Wait()
	}()
	var err error
	select {
	case err = <-exited:
	case <-time.After(d):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("drover did not exit within %s (killed)", d)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

// agentPid is the fake agent's pid from its pid file.
func agentPid(t *testing.T, pidfile string) int {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(data))
	return pid
}

// TestLED7_FullDisk: with its ledger on a file system that fills up
// mid-run, so that not even the run's end can be recorded, `drover run`
// stops the agent and exits 1 saying in one line that it could not write
// the ledger, and where; a signal is obeyed meanwhile (130); and ps, show
// and logs still answer from what the full ledger holds.
func TestLED7_FullDisk(t *testing.T) {
	disk := smallDisk(t, "2m")
	bin := buildDrover(t)
	db := filepath.Join(disk, "drover.db")
	// ended waits for drover's exit with status want, and checks that it
	// said once that the ledger is full, and that its agent is gone; it
	// returns the run's id.
	ended := func(cmd *exec.Cmd, sc *bufio.Scanner, stderr *syncBuffer, pidfile string, want int) string {
		t.Helper()
		if code := exitWithin(t, cmd, sc.Scan, 20*time.Second); code != want {
			t.Fatalf("exit %d, want %d; stderr:\n%s", code, want, stderr)
		}
		id := runIDRe.FindStringSubmatch(stderr.String())[1]
		said := "drover: run " + id + ": could not write the ledger " + db + ": "
		var lines []string
		for l := range strings.SplitSeq(strings.TrimSpace(stderr.String()), "\n") {
			if strings.HasPrefix(l, said) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "full") {
			t.Fatalf("stderr does not say once that the ledger is full:\n%s", stderr)
		}
		assertGone(t, agentPid(t, pidfile))
		return id
	}

	// The agent goes on printing; the disk fills under it.
	cmd, sc, stderr, pidfile := startDrover(t, bin, db, "drip", "run", "--json", "-a", "claude", "drip until the disk is full")
	for n := 0; n < 3 && sc.Scan(); n++ {
	}
	fill(t, disk)
	first := ended(cmd, sc, stderr, pidfile, ExitFailure)

	// An agent that ignores SIGTERM, and drover gets a SIGTERM once the
	// disk is full: it stops the agent (SIGKILL after the grace period)
	// and exits at once, as interrupted.
	unfill(t, disk)
	cmd, sc, stderr, pidfile = startDrover(t, bin, db, "hang", "run", "--json", "-a", "claude", "wait for a signal")
	if !sc.Scan() {
		t.Fatalf("no first event; stderr:\n%s", stderr)
	}
	fill(t, disk)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	second := ended(cmd, sc, stderr, pidfile, ExitInterrupted)

	// The disk is still full: reconciling the second run (its drover is
	// gone) cannot be recorded, which is a warning; the commands show
	// what the ledger has.
	fill(t, disk)
	read := func(args ...string) string {
		t.Helper()
		c := exec.Command(bin, append(args, "--db", db, "--log-level", "warn")...)
		var out, errb bytes.Buffer
		c.Stdout, c.Stderr = &out, &errb
		if err := c.Run(); err != nil {
			t.Fatalf("%v on the full ledger: %v\n%s", args, err, errb.String())
		}
		if !strings.Contains(errb.String(), "level=WARN") || !strings.Contains(errb.String(), second) {
			t.Errorf("%v: no warning that %s could not be reconciled:\n%s", args, second, errb.String())
		}
		return out.String()
	}
	var listed []string
	for l := range strings.SplitSeq(strings.TrimSpace(read("ps", "--json")), "\n") {
		var r store.Run
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("ps line %q: %v", l, err)
		}
		listed = append(listed, r.ID+" "+string(r.Status))
	}
	// The first run was reconciled when the second drover started, with
	// room on the disk; the second stays as the ledger last had it.
	if want := []string{second + " running", first + " failed"}; strings.Join(listed, ",") != strings.Join(want, ",") {
		t.Fatalf("ps lists %v, want %v", listed, want)
	}
	if out := read("show", second); !strings.Contains(out, "status    running") {
		t.Errorf("show %s:\n%s", second, out)
	}
	if out := read("logs", "--json", first); !strings.Contains(out, `"seq":3`) {
		t.Errorf("logs %s:\n%s", first, out)
	}
}
