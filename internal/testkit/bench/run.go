//go:build linux

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// Sample is one measured run: drover on the fake, or the fake piped into
// cat (the floor). Rates count the fake's body lines.
type Sample struct {
	// Lines is how many body lines the fake wrote, LineBytes their mean
	// size with the newline.
	Lines     int     `json:"lines"`
	LineBytes float64 `json:"lineBytes"`
	// WallSec is the whole process's (or pipeline's) life, from just
	// before it was started to its exit, and LinesPerSec Lines over it.
	WallSec     float64 `json:"wallSec"`
	LinesPerSec float64 `json:"linesPerSec"`
	// StreamSec is from the fake's first line to the last line read from
	// drover's (or cat's) stdout, and StreamLinesPerSec Lines over it:
	// the stream alone, without either process's start and exit.
	StreamSec         float64 `json:"streamSec"`
	StreamLinesPerSec float64 `json:"streamLinesPerSec"`
	// FirstEventMs is from the fake's writing the line drover turns into
	// its first event (Stamp.FirstEventNs) to that event's arrival on
	// drover's stdout; for the floor, from the fake's first line to its
	// arrival through cat.
	FirstEventMs float64 `json:"firstEventMs"`
	// MaxRSS is drover's peak resident set in bytes (wait4; see maxRSS),
	// FakeMaxRSS the fake's own (which, exec'd through drover's
	// containment launcher, includes the launcher's).
	MaxRSS     int64 `json:"maxRss,omitempty"`
	FakeMaxRSS int64 `json:"fakeMaxRss"`
	// CPUSec is the user and system CPU time of drover and of the
	// processes it waited for (the fake, through the launcher): steadier
	// than wall-clock rates on a shared machine (drover only).
	CPUSec float64 `json:"cpuSec,omitempty"`
	// Printed is how many lines were read from stdout; Types counts them
	// by UES type (drover only).
	Printed int            `json:"printed"`
	Types   map[string]int `json:"types,omitempty"`
	// Status is the done event's status, ExitCode drover's.
	Status   string `json:"status,omitempty"`
	ExitCode int    `json:"exitCode"`
}

// RunDrover measures `drover run --json -a AGENT [--partial]` on n body
// lines of shape (textChars, when not 0, overriding the shape's text
// length), in a sandbox of its own (home, XDG directories, ledger),
// with drover as e.Drover or, when set, droverPath, and extra variables
// in its environment. It fails when the run is not what the harness
// expects: exit 0, done success, one body event per line.
func (e *Env) RunDrover(ctx context.Context, shape Shape, n, textChars int, droverPath string, extra ...string) (Sample, error) {
	s, err := e.newSandbox()
	if err != nil {
		return Sample{}, err
	}
	defer s.remove()
	if droverPath == "" {
		droverPath = e.Drover
	}
	env := e.environ(s, append(fakeEnv(s, n, textChars), extra...)...)
	args := []string{"run", "--json", "-a", shape.Agent, "--db", s.db}
	if shape.Partial {
		args = append(args, "--partial")
	}
	c := command(ctx, env, s.work, droverPath, append(args, "bench")...)
	stderr := &tail{max: 16 << 10}
	c.Stderr = stderr
	out, err := c.StdoutPipe()
	if err != nil {
		return Sample{}, err
	}
	resetPeakRSS()
	start := time.Now()
	if err := c.Start(); err != nil {
		return Sample{}, err
	}
	rd, rerr := readLines(out, true)
	werr := c.Wait()
	end := time.Now()
	if rerr != nil {
		return Sample{}, fmt.Errorf("read drover's output: %w", rerr)
	}
	smp := Sample{Printed: rd.lines, Types: rd.types, Status: doneStatus(rd.done), ExitCode: c.ProcessState.ExitCode(),
		MaxRSS: maxRSS(c.ProcessState), CPUSec: (c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Seconds()}
	if werr != nil && !errors.As(werr, new(*exec.ExitError)) {
		return smp, werr
	}
	st, err := readStamp(s.stamp)
	if err != nil {
		return smp, fmt.Errorf("%w (drover exited %d: %s)", err, smp.ExitCode, stderr)
	}
	smp.fill(st, start, end, rd)
	smp.FirstEventMs = float64(rd.first-st.FirstEventNs) / 1e6
	if err := shape.check(smp, n); err != nil {
		return smp, fmt.Errorf("%s: %w (stderr: %s)", shape.Name, err, stderr)
	}
	return smp, nil
}

// RunPipe measures the floor of shape: the fake printing the same lines
// it prints to drover (without waiting for drover's requests), piped into
// cat, whose output is read as drover's is.
func (e *Env) RunPipe(ctx context.Context, shape Shape, n, textChars int) (Sample, error) {
	s, err := e.newSandbox()
	if err != nil {
		return Sample{}, err
	}
	defer s.remove()
	cat, err := exec.LookPath("cat")
	if err != nil {
		return Sample{}, err
	}
	env := e.environ(s, append(fakeEnv(s, n, textChars), SoloEnv+"=1")...)
	fake := command(ctx, env, s.work, filepath.Join(e.bin, shape.Command), shape.SoloArgs...)
	cc := command(ctx, env, s.work, cat)
	pr, pw, err := os.Pipe()
	if err != nil {
		return Sample{}, err
	}
	fake.Stdout, cc.Stdin = pw, pr
	fakeErr := &tail{max: 4 << 10}
	fake.Stderr = fakeErr
	out, err := cc.StdoutPipe()
	if err != nil {
		pr.Close()
		pw.Close()
		return Sample{}, err
	}
	start := time.Now()
	err = fake.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return Sample{}, err
	}
	err = cc.Start()
	pr.Close()
	if err != nil {
		_ = fake.Cancel()
		_ = fake.Wait()
		return Sample{}, err
	}
	rd, rerr := readLines(out, true)
	cerr := cc.Wait()
	ferr := fake.Wait()
	end := time.Now()
	if err := errors.Join(rerr, cerr, ferr); err != nil {
		return Sample{}, fmt.Errorf("fake | cat: %w (%s)", err, fakeErr)
	}
	st, err := readStamp(s.stamp)
	if err != nil {
		return Sample{}, err
	}
	smp := Sample{Printed: rd.lines}
	smp.fill(st, start, end, rd)
	smp.FirstEventMs = float64(rd.first-st.FirstLineNs) / 1e6
	if st.Lines != n || rd.lines != st.TotalLines {
		return smp, fmt.Errorf("fake | cat: %d body lines written of %d, %d lines read of %d", st.Lines, n, rd.lines, st.TotalLines)
	}
	return smp, nil
}

// fakeEnv is the fake's script: n lines, its stamp in the run's working
// directory, the text length when not the shape's.
func fakeEnv(s *sandbox, n, textChars int) []string {
	env := []string{LinesEnv + "=" + strconv.Itoa(n), StampEnv + "=" + s.stamp}
	if textChars > 0 {
		env = append(env, TextEnv+"="+strconv.Itoa(textChars))
	}
	return env
}

// fill sets the figures that come from the fake's stamp and the reading.
func (smp *Sample) fill(st Stamp, start, end time.Time, rd reading) {
	smp.Lines = st.Lines
	if st.Lines > 0 {
		smp.LineBytes = float64(st.BodyBytes) / float64(st.Lines)
	}
	smp.WallSec = end.Sub(start).Seconds()
	smp.LinesPerSec = float64(st.Lines) / smp.WallSec
	smp.StreamSec = float64(rd.last-st.FirstLineNs) / 1e9
	if smp.StreamSec > 0 {
		smp.StreamLinesPerSec = float64(st.Lines) / smp.StreamSec
	}
	smp.FakeMaxRSS = st.MaxRSSKB << 10
}

// check reports how a drover run's sample differs from what n body lines
// of the shape must give.
func (s Shape) check(smp Sample, n int) error {
	switch {
	case smp.ExitCode != 0:
		return fmt.Errorf("drover exited %d", smp.ExitCode)
	case smp.Status != "success":
		return fmt.Errorf("done status %q, want success", smp.Status)
	case smp.Types["done"] != 1:
		return fmt.Errorf("%d done events", smp.Types["done"])
	case smp.Lines != n:
		return fmt.Errorf("the fake wrote %d body lines of %d", smp.Lines, n)
	case smp.Types[s.bodyType] != n:
		return fmt.Errorf("%d %s events for %d body lines", smp.Types[s.bodyType], s.bodyType, n)
	case s.wholeText && smp.Types["text"] != 1:
		return fmt.Errorf("%d text events, want 1 (the deltas' message)", smp.Types["text"])
	case smp.Types["error"] != 0:
		return fmt.Errorf("%d error events", smp.Types["error"])
	}
	return nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string { return string(t.b) }
