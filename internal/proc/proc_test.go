//go:build unix

package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Upper bounds only: they catch hangs, not slowness, so they are generous.
const hangBound = 20 * time.Second

func fakeSpec(t testing.TB, mode, arg string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Path: exe,
		// A race-enabled binary sleeps 1s at exit by default; the fakes are
		// this binary, so turn that off to keep the tests fast.
		Env:          append(os.Environ(), fakeAgentEnv+"="+mode, fakeArgEnv+"="+arg, "GORACE=atexit_sleep_ms=0"),
		Grace:        5 * time.Second,
		LingerGrace:  100 * time.Millisecond,
		DrainTimeout: 5 * time.Second,
	}
}

func startFake(t testing.TB, ctx context.Context, spec Spec) *Process {
	t.Helper()
	p, err := Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

type item struct {
	line string
	err  error
}

func collect(p *Process) []item {
	var items []item
	for line, err := range p.Lines() {
		items = append(items, item{string(line), err})
	}
	return items
}

// within runs f and fails the test if it does not return within d.
func within[T any](t *testing.T, d time.Duration, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
		panic("unreachable")
	}
}

// pidAlive reports whether pid is a live (non-zombie) process.
func pidAlive(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return false
	}
	if runtime.GOOS != "linux" {
		return true
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	return len(f) > 0 && f[0][0] != 'Z' && f[0][0] != 'X'
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type pids struct {
	Leader     int `json:"leader"`
	Child      int `json:"child"`
	Grandchild int `json:"grandchild"`
}

// decodePids may run outside the test goroutine, hence Errorf.
func decodePids(t *testing.T, line []byte) pids {
	t.Helper()
	var v pids
	if err := json.Unmarshal(line, &v); err != nil {
		t.Errorf("decode %q: %v", line, err)
	}
	return v
}

func TestLinesAndExit(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "lines", "200"))
	if p.Pid() <= 0 || p.Pgid() != p.Pid() {
		t.Fatalf("Pid %d Pgid %d", p.Pid(), p.Pgid())
	}
	if pg, err := syscall.Getpgid(p.Pid()); err == nil && pg != p.Pid() {
		t.Errorf("child pgid = %d, want own group %d", pg, p.Pid())
	}
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	if len(items) != 200 {
		t.Fatalf("got %d lines, want 200", len(items))
	}
	for i, it := range items {
		if want := `{"i":` + strconv.Itoa(i) + `}`; it.err != nil || it.line != want {
			t.Fatalf("line %d = %q, %v; want %q", i, it.line, it.err, want)
		}
	}
	e := within(t, hangBound, "Wait", p.Wait)
	if !e.Success() || e.Code != 0 || e.Signal != "" || e.Stopped || e.Err != nil {
		t.Errorf("Exit = %+v, want clean success", e)
	}
	if e.String() != "exit status 0" || e.Duration <= 0 {
		t.Errorf("String %q Duration %v", e.String(), e.Duration)
	}
	if p.Skipped() != 0 {
		t.Errorf("Skipped = %d", p.Skipped())
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done not closed after Wait")
	}
}

func TestHugeLinePassesIntact(t *testing.T) {
	t.Parallel()
	const size = 16 << 20
	p := startFake(t, context.Background(), fakeSpec(t, "sandwich", strconv.Itoa(size)))
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	if len(items) != 3 {
		t.Fatalf("got %d items, want 3", len(items))
	}
	if items[0].line != `{"pos":"first"}` || items[2].line != `{"pos":"last"}` {
		t.Errorf("neighbours = %q, %q", items[0].line, items[2].line)
	}
	big := items[1]
	if big.err != nil || len(big.line) != size {
		t.Fatalf("big line: len %d err %v, want len %d", len(big.line), big.err, size)
	}
	if big.line != string(bigJSONLine(size)) {
		t.Error("big line content corrupted")
	}
	if e := p.Wait(); !e.Success() {
		t.Errorf("Exit = %v", e)
	}
}

func TestOversizeLineSkippedAndStreamContinues(t *testing.T) {
	t.Parallel()
	const limit, size = 1 << 20, 3 << 20
	spec := fakeSpec(t, "sandwich", strconv.Itoa(size))
	spec.MaxLineBytes = limit
	p := startFake(t, context.Background(), spec)
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	if len(items) != 3 {
		t.Fatalf("got %d items, want 3: %v", len(items), items)
	}
	if items[0].line != `{"pos":"first"}` || items[0].err != nil {
		t.Errorf("first = %+v", items[0])
	}
	var tooLong *LineTooLongError
	if !errors.As(items[1].err, &tooLong) || items[1].line != "" {
		t.Fatalf("second = %q, %v; want *LineTooLongError", items[1].line, items[1].err)
	}
	if tooLong.Size != size || tooLong.Limit != limit {
		t.Errorf("LineTooLongError = %+v, want Size %d Limit %d", tooLong, size, limit)
	}
	if items[2].line != `{"pos":"last"}` || items[2].err != nil {
		t.Errorf("last = %+v", items[2])
	}
	if e := p.Wait(); !e.Success() {
		t.Errorf("Exit = %v", e)
	}
}

func TestNonJSONLinesSkippedAndCounted(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "mixed", ""))
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	want := []string{`{"i":0}`, `{"i":1}`, `  {"i":2}`, `{"i":3}`}
	if len(items) != len(want) {
		t.Fatalf("got %v, want %q", items, want)
	}
	for i, it := range items {
		if it.err != nil || it.line != want[i] {
			t.Errorf("item %d = %q, %v; want %q", i, it.line, it.err, want[i])
		}
	}
	if got := p.Skipped(); got != 6 {
		t.Errorf("Skipped = %d, want 6", got)
	}
}

func TestStderrTailAndExitCode(t *testing.T) {
	t.Parallel()
	const written = 200 << 10
	p := startFake(t, context.Background(), fakeSpec(t, "stderr", strconv.Itoa(written)))
	if items := within(t, hangBound, "Lines", func() []item { return collect(p) }); len(items) != 0 {
		t.Errorf("stdout items = %v, want none", items)
	}
	e := within(t, hangBound, "Wait", p.Wait)
	if e.Code != 3 || e.Signal != "" || e.Success() || e.Stopped || e.Err != nil {
		t.Errorf("Exit = %+v, want code 3", e)
	}
	if e.String() != "exit status 3" {
		t.Errorf("String = %q", e.String())
	}
	want := string(stderrPattern(written)[written-DefaultStderrTailBytes:])
	if len(e.StderrTail) != DefaultStderrTailBytes || e.StderrTail != want {
		t.Errorf("StderrTail: len %d, matches last %d bytes written: %v",
			len(e.StderrTail), DefaultStderrTailBytes, e.StderrTail == want)
	}
	if p.StderrTail() != want {
		t.Error("StderrTail() differs from Exit.StderrTail")
	}
}

func TestStopKillsWholeGroupIgnoringSIGTERM(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "leader-ignore-term", ""))
	var got pids
	within(t, hangBound, "announcements", func() error {
		for line, err := range p.Lines() {
			if err != nil {
				return err
			}
			v := decodePids(t, line)
			if v.Leader != 0 {
				got.Leader, got.Child = v.Leader, v.Child
			}
			if v.Grandchild != 0 {
				got.Grandchild = v.Grandchild
			}
			if got.Leader != 0 && got.Grandchild != 0 {
				break // both ignore SIGTERM now
			}
		}
		return nil
	})
	if got.Leader != p.Pid() || got.Child != got.Grandchild {
		t.Fatalf("pids = %+v, process pid %d", got, p.Pid())
	}
	if !GroupAlive(p.Pgid()) {
		t.Fatal("GroupAlive = false while running")
	}

	within(t, hangBound, "Stop", func() bool { p.Stop(200 * time.Millisecond); return true })
	select {
	case <-p.Done():
	default:
		t.Error("Stop returned before Done")
	}
	// Stop returns after the group's final SIGKILL took effect, so no polling.
	for _, pid := range []int{got.Leader, got.Child} {
		if pidAlive(pid) {
			t.Errorf("pid %d survived Stop", pid)
		}
	}
	if GroupAlive(p.Pgid()) {
		t.Error("GroupAlive = true after Stop")
	}
	e := within(t, hangBound, "Wait", p.Wait)
	if e.Signal != "killed" || e.Code != -1 || !e.Stopped || e.Success() {
		t.Errorf("Exit = %+v, want stopped, killed", e)
	}
	if e.String() != "killed by signal killed" {
		t.Errorf("String = %q", e.String())
	}
}

func TestLeaderExitKillsLingeringGrandchild(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "leader-exit-linger", ""))
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	var child int
	for _, it := range items {
		if it.err != nil {
			t.Fatalf("Lines error: %v", it.err)
		}
		if v := decodePids(t, []byte(it.line)); v.Leader != 0 {
			child = v.Child
		}
	}
	if child == 0 {
		t.Fatalf("no announcement in %v", items)
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	e := within(t, hangBound, "Wait", p.Wait)
	if !e.Success() || e.Stopped {
		t.Errorf("Exit = %+v, want success, not stopped", e)
	}
	if pidAlive(child) {
		t.Errorf("lingering grandchild %d survived", child)
	}
	if GroupAlive(p.Pgid()) {
		t.Error("GroupAlive = true after Wait")
	}
}

// TestADP1_EscapedDescendantKilled: a descendant that left the process
// group (setsid) is killed when the process ends, found by the tag its
// environment inherited: nothing the vendor started outlives the run.
func TestADP1_EscapedDescendantKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("descendants are found through /proc")
	}
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "leader-exit-escape", ""))
	var child int
	for line, err := range p.Lines() {
		if err == nil {
			if v := decodePids(t, line); v.Leader != 0 {
				child = v.Child
			}
		}
	}
	if child == 0 {
		t.Fatal("no announcement")
	}
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if pg, err := syscall.Getpgid(child); err == nil && pg == p.Pgid() {
		t.Fatalf("grandchild %d did not escape the group", child)
	}
	within(t, hangBound, "Wait", p.Wait)
	if pidAlive(child) {
		t.Fatalf("escaped grandchild %d still alive after Wait", child)
	}
}

func TestEscapedGrandchildDoesNotHangLines(t *testing.T) {
	t.Parallel()
	// Without the tag the escaped grandchild is not found: it keeps stdout
	// open, and Wait must still return.
	spec := fakeSpec(t, "leader-exit-escape-untagged", "")
	spec.DrainTimeout = 300 * time.Millisecond
	p := startFake(t, context.Background(), spec)
	var child int
	within(t, hangBound, "Lines", func() bool {
		for line, err := range p.Lines() {
			if err != nil {
				t.Errorf("Lines error: %v", err)
				continue
			}
			if v := decodePids(t, line); v.Leader != 0 {
				child = v.Child
			}
		}
		return true
	})
	if child == 0 {
		t.Fatal("no announcement")
	}
	// The escaped process is outside the group, so only the test can clean
	// it up.
	t.Cleanup(func() { _ = syscall.Kill(child, syscall.SIGKILL) })
	if pg, err := syscall.Getpgid(child); err == nil && pg == p.Pgid() {
		t.Fatalf("grandchild %d did not escape the group", child)
	}
	e := within(t, hangBound, "Wait", p.Wait)
	if !e.Success() {
		t.Errorf("Exit = %+v", e)
	}
	if !pidAlive(child) {
		t.Log("escaped grandchild exited early; drain path may not have been exercised")
	}
}

func TestContextCancelStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startFake(t, ctx, fakeSpec(t, "sleep", ""))
	within(t, hangBound, "Lines", func() bool {
		for _, err := range p.Lines() {
			if err != nil {
				t.Errorf("Lines error: %v", err)
			}
			cancel() // after the ready line; Lines must then end
		}
		return true
	})
	e := within(t, hangBound, "Wait", p.Wait)
	if !e.Stopped || e.Signal != "terminated" || e.Code != -1 {
		t.Errorf("Exit = %+v, want stopped by SIGTERM", e)
	}
}

func TestStartWithCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := Start(ctx, fakeSpec(t, "lines", "1"))
	if err == nil {
		_ = p.Close()
		t.Fatal("Start succeeded with a cancelled context")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestStartMissingBinary(t *testing.T) {
	t.Parallel()
	p, err := Start(context.Background(), Spec{Path: "/nonexistent/claude"})
	if err == nil {
		_ = p.Close()
		t.Fatal("Start succeeded")
	}
	if !strings.Contains(err.Error(), "start /nonexistent/claude") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("err = %v", err)
	}
	if _, err := Start(context.Background(), Spec{}); err == nil {
		t.Error("Start with empty Path succeeded")
	}
}

func TestStdinReachesChild(t *testing.T) {
	t.Parallel()
	// Larger than a pipe buffer, so the copy has to wait for the child.
	prompt := strings.Repeat("Fix the bug in main.go. ", 50_000)
	spec := fakeSpec(t, "stdin-echo", "")
	spec.Stdin = strings.NewReader(prompt)
	p := startFake(t, context.Background(), spec)
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	if len(items) != 1 || items[0].err != nil {
		t.Fatalf("items = %d, first err %v", len(items), items)
	}
	var got struct {
		Stdin string `json:"stdin"`
		N     int    `json:"n"`
	}
	if err := json.Unmarshal([]byte(items[0].line), &got); err != nil {
		t.Fatal(err)
	}
	if got.N != len(prompt) || got.Stdin != prompt {
		t.Errorf("child read %d bytes, want %d (content equal: %v)", got.N, len(prompt), got.Stdin == prompt)
	}
	if e := p.Wait(); !e.Success() {
		t.Errorf("Exit = %v (child saw no EOF?)", e)
	}
}

func TestNilStdinIsEOF(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "stdin-echo", ""))
	items := within(t, hangBound, "Lines", func() []item { return collect(p) })
	if len(items) != 1 || items[0].line != `{"n":0,"stdin":""}` {
		t.Errorf("items = %v", items)
	}
	if e := p.Wait(); !e.Success() {
		t.Errorf("Exit = %v", e)
	}
}

func TestCloseIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "sleep", ""))
	exits := make([]Exit, 8)
	var wg sync.WaitGroup
	for i := range exits {
		wg.Go(func() {
			if i%2 == 0 {
				_ = p.Close()
			}
			exits[i] = p.Wait()
		})
	}
	within(t, hangBound, "Close", func() bool { wg.Wait(); return true })
	for i, e := range exits {
		if e.Signal != "terminated" || !e.Stopped || e.Err != nil {
			t.Errorf("exit %d = %+v", i, e)
		}
		if e.Signal != exits[0].Signal || e.Duration != exits[0].Duration {
			t.Errorf("exit %d differs: %+v vs %+v", i, e, exits[0])
		}
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	p.Stop(0)
	for _, err := range p.Lines() {
		if err != nil {
			t.Errorf("Lines after Close yielded %v", err)
		}
	}
}

func TestCloseWhileLinesBlocked(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "sleep", ""))
	ready := make(chan struct{})
	done := make(chan []item)
	go func() {
		var items []item
		for line, err := range p.Lines() {
			items = append(items, item{string(line), err})
			if len(items) == 1 {
				close(ready)
			}
		}
		done <- items
	}()
	within(t, hangBound, "ready line", func() bool { <-ready; return true })
	within(t, hangBound, "Close", func() error { return p.Close() })
	items := within(t, hangBound, "Lines end", func() []item { return <-done })
	if len(items) != 1 || items[0].err != nil {
		t.Errorf("items = %v", items)
	}
}

func TestLinesSecondRangeFails(t *testing.T) {
	t.Parallel()
	p := startFake(t, context.Background(), fakeSpec(t, "lines", "3"))
	if n := len(within(t, hangBound, "Lines", func() []item { return collect(p) })); n != 3 {
		t.Fatalf("first range: %d items", n)
	}
	items := collect(p)
	if len(items) != 1 || items[0].err == nil {
		t.Errorf("second range = %v, want one error", items)
	}
}

func TestBreakOutOfLinesEarly(t *testing.T) {
	t.Parallel()
	// Far more than a pipe buffer: the child blocks writing once we stop
	// reading, so only Close can end it.
	p := startFake(t, context.Background(), fakeSpec(t, "lines", "100000"))
	for _, err := range p.Lines() {
		if err != nil {
			t.Fatal(err)
		}
		break
	}
	within(t, hangBound, "Close", p.Close)
	if e := p.Wait(); !e.Stopped || e.Signal != "terminated" {
		t.Errorf("Exit = %+v, want stopped by SIGTERM", e)
	}
}

func TestKillGroupAndGroupAlive(t *testing.T) {
	t.Parallel()
	for _, pgid := range []int{-5, 0, 1} {
		if GroupAlive(pgid) {
			t.Errorf("GroupAlive(%d) = true", pgid)
		}
		if KillGroup(pgid) == nil {
			t.Errorf("KillGroup(%d) = nil, want refusal", pgid)
		}
	}
	if KillGroup(syscall.Getpgrp()) == nil {
		t.Error("KillGroup(own group) = nil, want refusal")
	}

	p := startFake(t, context.Background(), fakeSpec(t, "sleep", ""))
	for range p.Lines() {
		break // ready: the child is running
	}
	if !GroupAlive(p.Pgid()) {
		t.Fatal("GroupAlive = false for a running group")
	}
	if err := KillGroup(p.Pgid()); err != nil {
		t.Fatalf("KillGroup = %v", err)
	}
	e := within(t, hangBound, "Wait", p.Wait)
	if e.Signal != "killed" || e.Stopped {
		t.Errorf("Exit = %+v, want killed, not stopped", e)
	}
	if GroupAlive(p.Pgid()) {
		t.Error("GroupAlive = true after the group was killed")
	}
	if err := KillGroup(p.Pgid()); err != nil {
		t.Errorf("KillGroup on a gone group = %v, want nil", err)
	}
}

func TestLookPath(t *testing.T) {
	const envVar = "DROVER_PROC_TEST_BIN"
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	t.Setenv(envVar, filepath.Join(dir, "missing"))
	_, err = LookPath("claude", envVar)
	if err == nil || !strings.Contains(err.Error(), envVar) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}

	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envVar, plain)
	if _, err := LookPath("claude", envVar); err == nil || !strings.Contains(err.Error(), "not executable") {
		t.Errorf("non-executable: err = %v", err)
	}
	t.Setenv(envVar, dir)
	if _, err := LookPath("claude", envVar); err == nil || !strings.Contains(err.Error(), envVar) {
		t.Errorf("directory: err = %v", err)
	}

	t.Setenv(envVar, exe)
	if got, err := LookPath("claude", envVar); err != nil || got != exe {
		t.Errorf("valid: got %q, %v; want %q", got, err, exe)
	}

	t.Setenv(envVar, "")
	_, err = LookPath("drover-no-such-binary-xyz", envVar)
	if err == nil || !strings.Contains(err.Error(), "not found on PATH") || !strings.Contains(err.Error(), envVar) {
		t.Errorf("not on PATH: err = %v", err)
	}
	if got, err := LookPath("sh", envVar); err != nil || !filepath.IsAbs(got) {
		t.Errorf("sh: got %q, %v", got, err)
	}
	if got, err := LookPath("sh", ""); err != nil || got == "" {
		t.Errorf("sh without env var: got %q, %v", got, err)
	}
}

// TestNoDescriptorLeak runs the main lifecycles and checks the parent's
// open descriptors return to where they were. Not parallel, so other tests
// cannot open descriptors meanwhile.
func TestNoDescriptorLeak(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("no /proc/self/fd")
	}
	countFDs := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	cycle := func() {
		p := startFake(t, context.Background(), fakeSpec(t, "lines", "10"))
		collect(p)
		p.Wait()

		spec := fakeSpec(t, "stdin-echo", "")
		spec.Stdin = strings.NewReader("hi")
		p = startFake(t, context.Background(), spec)
		collect(p)
		_ = p.Close()

		p = startFake(t, context.Background(), fakeSpec(t, "sleep", ""))
		_ = p.Close() // without ever reading stdout

		if p, err := Start(context.Background(), Spec{Path: "/nonexistent/x", Stdin: strings.NewReader("x")}); err == nil {
			_ = p.Close()
		}
	}
	cycle() // warm up runtime descriptors (netpoller etc.)
	before := countFDs()
	for range 3 {
		cycle()
	}
	if after := countFDs(); after != before {
		t.Errorf("open descriptors: %d before, %d after", before, after)
	}
}

// TestSlowConsumerLosesNothing: lines still in the pipe when the process
// exits reach a consumer that is slow (3× the drain timeout) with an
// earlier line; only a reader blocked on an empty pipe is given up.
func TestSlowConsumerLosesNothing(t *testing.T) {
	spec := fakeSpec(t, "two-phase", "100")
	spec.DrainTimeout = 200 * time.Millisecond
	release, releaseW := io.Pipe()
	spec.Stdin = release
	p := startFake(t, context.Background(), spec)
	n := 0
	for _, err := range p.Lines() {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if n == 1 {
			releaseW.Close() // the fake now writes 100 lines into the pipe and exits
			<-p.Done()
			time.Sleep(3 * spec.DrainTimeout)
		}
	}
	if n != 101 {
		t.Fatalf("got %d lines, want 101: lines in the pipe were dropped", n)
	}
}

// TestKillAllSkipsGrace: KillAll ends a process that ignores SIGTERM at once,
// though its Stop grace is long.
func TestKillAllSkipsGrace(t *testing.T) {
	spec := fakeSpec(t, "leader-ignore-term", "")
	spec.Grace = time.Hour
	p := startFake(t, context.Background(), spec)
	next, stop := iter.Pull2(p.Lines())
	defer stop()
	if _, err, ok := next(); !ok || err != nil { // the fake announces its pids
		t.Fatalf("no announcement: %v", err)
	}
	if n := KillAll(); n < 1 {
		t.Fatalf("KillAll signalled %d groups", n)
	}
	select {
	case <-p.Done():
	case <-time.After(hangBound):
		t.Fatal("process survived KillAll")
	}
	stop() // Wait waits for a consumer that still holds a line
	if e := p.Wait(); e.Signal != "killed" {
		t.Fatalf("exit %+v", e)
	}
	if KillAll() != 0 {
		t.Fatal("an ended process is still registered")
	}
}
