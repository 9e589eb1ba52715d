//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/drover-run/drover/internal/proc"
)

// CancelResult is one cancellation: drover run on a fake streaming slowly
// with children in its process group, interrupted (SIGINT, as Ctrl-C) once
// events flow.
type CancelResult struct {
	// Variant says how the fake and its children take SIGTERM.
	Variant    string `json:"variant"`
	IgnoreTerm bool   `json:"ignoreTerm"`
	Children   int    `json:"children"`
	// GraceMs is drover's SIGTERM→SIGKILL grace (proc.DefaultGrace) and
	// TargetMs is the bound of PERF (docs/performance.md), the grace + 100 ms.
	GraceMs  float64 `json:"graceMs"`
	TargetMs float64 `json:"targetMs"`
	// GoneMs is from SIGINT to the moment no member of the fake's process
	// group (the fake and its children) was alive (zombies count as gone),
	// polled every 200 µs.
	GoneMs float64 `json:"goneMs"`
	// ExitMs is from SIGINT to drover's exit, ExitCode its status (130
	// after SIGINT), Status the run's done status.
	ExitMs   float64 `json:"exitMs"`
	ExitCode int     `json:"exitCode"`
	Status   string  `json:"status"`
	// LeftBehind counts the harness's processes still alive once drover
	// had exited (killed then); anything but 0 is a failure.
	LeftBehind int `json:"leftBehind"`
}

// RunCancel measures one cancellation of `drover run --json -a claude`
// on a fake printing 20 lines a second with children processes; with
// ignoreTerm, the fake and its children ignore SIGTERM, so only the
// group's SIGKILL at the end of the grace ends them.
func (e *Env) RunCancel(ctx context.Context, children int, ignoreTerm bool) (CancelResult, error) {
	res := CancelResult{Variant: "obeys SIGTERM", IgnoreTerm: ignoreTerm, Children: children,
		GraceMs: ms(proc.DefaultGrace), TargetMs: ms(proc.DefaultGrace + 100*time.Millisecond)}
	if ignoreTerm {
		res.Variant = "ignores SIGTERM"
	}
	s, err := e.newSandbox()
	if err != nil {
		return res, err
	}
	defer s.remove()
	extra := append(fakeEnv(s, 1_000_000, 0), RateEnv+"=20", fmt.Sprintf("%s=%d", ChildrenEnv, children))
	if ignoreTerm {
		extra = append(extra, IgnoreTermEnv+"=1")
	}
	c := command(ctx, e.environ(s, extra...), s.work, e.Drover, "run", "--json", "-a", "claude", "--db", s.db, "bench")
	stderr := &tail{max: 16 << 10}
	c.Stderr = stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return res, err
	}
	if err := c.Start(); err != nil {
		return res, err
	}
	// The reader is owned here: it ends with drover's stdout, and is
	// waited for (reads) before Wait.
	lines := make(chan int, 1)
	reads := make(chan reading, 1)
	go func() {
		rd, _ := readLines(&notify{r: out, after: 5, ch: lines}, true)
		reads <- rd
	}()
	fail := func(err error) (CancelResult, error) {
		_ = c.Cancel()
		<-reads
		_ = c.Wait()
		return res, err
	}
	select {
	case <-lines:
	case <-time.After(15 * time.Second):
		return fail(fmt.Errorf("no events from drover within 15 s (%s)", stderr))
	case <-ctx.Done():
		return fail(ctx.Err())
	}
	st, err := readStamp(s.stamp)
	if err != nil {
		return fail(err)
	}
	members := append([]int{st.Pid}, st.Children...)
	t0 := time.Now()
	if err := c.Process.Signal(syscall.SIGINT); err != nil {
		return fail(err)
	}
	deadline := t0.Add(proc.DefaultGrace + 5*time.Second)
	for time.Now().Before(deadline) {
		gone := true
		for _, pid := range members {
			if alive(pid, st.Pgid) {
				gone = false
				break
			}
		}
		if gone {
			res.GoneMs = ms(time.Since(t0))
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	rd := <-reads
	werr := c.Wait()
	res.ExitMs = ms(time.Since(t0))
	res.ExitCode = c.ProcessState.ExitCode()
	res.Status = doneStatus(rd.done)
	if werr != nil && !errors.As(werr, new(*exec.ExitError)) {
		return res, werr
	}
	for _, pid := range members {
		if alive(pid, st.Pgid) {
			res.LeftBehind++
		}
	}
	if n := e.killLeftovers(); n > res.LeftBehind {
		res.LeftBehind = n
	}
	switch {
	case res.GoneMs == 0:
		return res, fmt.Errorf("cancel: the fake's group was still alive %v after SIGINT", proc.DefaultGrace+5*time.Second)
	case res.LeftBehind > 0:
		return res, fmt.Errorf("cancel: %d processes left behind after drover exited", res.LeftBehind)
	case res.Status != "interrupted":
		return res, fmt.Errorf("cancel: done status %q, want interrupted (stderr: %s)", res.Status, stderr)
	}
	return res, nil
}

// notify passes reads through and sends on ch once after more than after
// newlines went by.
type notify struct {
	r     interface{ Read([]byte) (int, error) }
	after int
	ch    chan<- int
	seen  int
	sent  bool
}

func (n *notify) Read(p []byte) (int, error) {
	k, err := n.r.Read(p)
	if !n.sent {
		for _, b := range p[:k] {
			if b == '\n' {
				n.seen++
			}
		}
		if n.seen > n.after {
			n.sent = true
			n.ch <- n.seen
		}
	}
	return k, err
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
