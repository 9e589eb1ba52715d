//go:build linux

package proc

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/contain"
)

func needLandlock(t *testing.T) {
	t.Helper()
	if err := contain.Available(); err != nil {
		t.Skipf("this kernel cannot contain: %v", err)
	}
}

// TestContainedProcess: a process started with Spec.Contain cannot write
// outside its write directories (EACCES) and can inside; its stdin,
// stdout, pid and process group are as without containment.
func TestContainedProcess(t *testing.T) {
	needLandlock(t)
	in, out := t.TempDir(), t.TempDir()
	for _, c := range []struct {
		path, want string
	}{
		{filepath.Join(in, "f"), "ok"},
		{filepath.Join(out, "f"), "permission denied"},
	} {
		spec := fakeSpec(t, "write", c.path)
		spec.Contain = &contain.Policy{Write: []string{in}}
		spec.Stdin = strings.NewReader("the prompt")
		p := startFake(t, context.Background(), spec)
		items := within(t, hangBound, "Lines", func() []item { return collect(p) })
		if len(items) != 1 || items[0].err != nil {
			t.Fatalf("items %v", items)
		}
		var got struct {
			Write, Stdin string
			Pid, Pgid    int
		}
		if err := json.Unmarshal([]byte(items[0].line), &got); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(got.Write, c.want) || got.Stdin != "the prompt" || got.Pid != p.Pid() || got.Pgid != p.Pgid() {
			t.Errorf("write %s: %+v (pid %d), want %q", c.path, got, p.Pid(), c.want)
		}
		if e := p.Wait(); !e.Success() {
			t.Errorf("exit %v: %s", e, e.StderrTail)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "f")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the contained process wrote outside: %v", err)
	}
}

// TestContainedStopKillsWholeGroup: Stop ends a contained leader that
// ignores SIGTERM and its grandchild, as it does an uncontained one.
func TestContainedStopKillsWholeGroup(t *testing.T) {
	needLandlock(t)
	spec := fakeSpec(t, "leader-ignore-term", "")
	spec.Contain = &contain.Policy{Write: []string{t.TempDir()}}
	spec.Grace = 200 * time.Millisecond
	p := startFake(t, context.Background(), spec)
	next, stop := iter.Pull2(p.Lines())
	line, err, ok := next()
	if !ok || err != nil {
		t.Fatalf("no announcement: %v", err)
	}
	var pids struct{ Leader, Child int }
	if err := json.Unmarshal(line, &pids); err != nil || pids.Leader != p.Pid() {
		t.Fatalf("announcement %s (pid %d): %v", line, p.Pid(), err)
	}
	stop()
	within(t, hangBound, "Stop", func() bool { p.Stop(spec.Grace); return true })
	if e := p.Wait(); e.Signal != "killed" || !e.Stopped {
		t.Errorf("exit %+v", e)
	}
	if err := syscall.Kill(pids.Child, 0); !errors.Is(err, syscall.ESRCH) && GroupAlive(p.Pgid()) {
		t.Errorf("grandchild %d survived: %v", pids.Child, err)
	}
}

// TestContainedMissingBinary: a program that cannot be run is Start's
// error, as without containment, not a launcher's exit.
func TestContainedMissingBinary(t *testing.T) {
	needLandlock(t)
	pol := &contain.Policy{Write: []string{t.TempDir()}}
	if p, err := Start(context.Background(), Spec{Path: "/nonexistent/claude", Contain: pol}); err == nil {
		_ = p.Close()
		t.Fatal("Start succeeded")
	} else if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "start /nonexistent/claude") {
		t.Errorf("err = %v", err)
	}
	if p, err := Start(context.Background(), Spec{Path: t.TempDir(), Contain: pol}); err == nil {
		_ = p.Close()
		t.Fatal("Start of a directory succeeded")
	}
}
