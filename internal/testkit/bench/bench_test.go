//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain is also the fake: the harness runs this test binary under the
// vendors' names (and as the fake's children).
func TestMain(m *testing.M) {
	if IsFake() {
		os.Exit(FakeMain(filepath.Base(os.Args[0]), os.Args[1:]))
	}
	goleak.VerifyTestMain(m)
}

// buildDrover builds drover into a temporary directory.
func buildDrover(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		gocmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), "drover")
	cmd := exec.Command(gocmd, "build", "-o", out, "github.com/drover-run/drover/cmd/drover")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as scripts/bench builds it
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/drover: %v\n%s", err, b)
	}
	return out
}

// TestHarnessSmoke runs the whole harness at a tiny scale and checks its
// own invariants, never speed: every shape's run ends success with one
// event per line, the floor reads every line, cancellation leaves nothing
// behind, serve loses nothing, and every figure is positive.
func TestHarnessSmoke(t *testing.T) {
	drover := buildDrover(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const lines = 2000
	serve := &ServeConfig{Runs: 5, Rate: 20, Duration: 3 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Drover: drover, Fake: exe, Dir: t.TempDir(), Shapes: Shapes, Lines: lines, Reps: 1,
		Cancel: true, CancelChildren: 2, Serve: serve})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Shapes) != len(Shapes) {
		t.Fatalf("%d shapes reported, want %d", len(rep.Shapes), len(Shapes))
	}
	for i, s := range rep.Shapes {
		shape := Shapes[i]
		d, p := s.Drover, s.Pipe
		if d.Types[shape.bodyType] != lines || d.Status != "success" || d.Types["done"] != 1 {
			t.Errorf("%s: %d %s events, status %q, %d done; want %d, success, 1", s.Shape, d.Types[shape.bodyType],
				shape.bodyType, d.Status, d.Types["done"], lines)
		}
		for name, v := range map[string]float64{
			"drover lines/s": d.LinesPerSec, "drover stream lines/s": d.StreamLinesPerSec, "pipe lines/s": p.LinesPerSec,
			"pipe stream lines/s": p.StreamLinesPerSec, "ratio": s.Ratio, "stream ratio": s.StreamRatio,
			"drover peak RSS": float64(d.MaxRSS), "fake peak RSS": float64(d.FakeMaxRSS), "bytes/line": d.LineBytes,
			"first event": s.FirstEventMs, "first event under load": d.FirstEventMs, "pipe first line": p.FirstEventMs,
		} {
			if !(v > 0) {
				t.Errorf("%s: %s = %v, want > 0", s.Shape, name, v)
			}
		}
		if p.Lines != lines || p.Printed < lines {
			t.Errorf("%s: pipe: %d body lines, %d read; want %d", s.Shape, p.Lines, p.Printed, lines)
		}
	}
	if len(rep.Cancel) != 2 {
		t.Fatalf("%d cancellations, want 2", len(rep.Cancel))
	}
	for _, c := range rep.Cancel {
		if !(c.GoneMs > 0) || c.LeftBehind != 0 || c.ExitCode != 130 || c.Status != "interrupted" {
			t.Errorf("cancel (%s): %+v; want the group gone, nothing left, exit 130, interrupted", c.Variant, c)
		}
		if c.IgnoreTerm && c.GoneMs < c.GraceMs {
			t.Errorf("cancel (%s): gone in %.1f ms, before the %.0f ms grace: the fake did not ignore SIGTERM", c.Variant, c.GoneMs, c.GraceMs)
		}
	}
	sv := rep.Serve
	if sv == nil {
		t.Fatal("no serve result")
	}
	if want := 5 * 20 * 3; sv.Expected != want || sv.Received != want || sv.Lost != 0 || sv.Gaps != 0 || sv.Failed != 0 || sv.LeftBehind != 0 {
		t.Errorf("serve: %+v; want %d events expected and received, nothing lost", *sv, want)
	}
	// The part of the latency before drover is a part of it, within the
	// event timestamp's millisecond.
	if !(sv.PeakRSS > 0) || !(sv.P50Ms > 0) || !(sv.P99Ms >= sv.P50Ms) || !(sv.ReadP99Ms <= sv.P99Ms+1) || sv.ExitCode != 130 {
		t.Errorf("serve: peak RSS %d, p50 %v, p99 %v, p99 to drover %v, exit %d", sv.PeakRSS, sv.P50Ms, sv.P99Ms, sv.ReadP99Ms, sv.ExitCode)
	}
	var out bytes.Buffer
	rep.Print(&out)
	for _, s := range Shapes {
		if !strings.Contains(out.String(), s.Name) {
			t.Errorf("the printed report names no %s:\n%s", s.Name, out.String())
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Error(err)
	}
}

// TestFakeLines: every line the fake prints, in each protocol it speaks,
// is one JSON value, and it prints the body lines it was asked for.
func TestFakeLines(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"claude", "-p", "--input-format", "stream-json"}, {"claude", "-p"},
		{"gemini", "--acp"}, {"gemini", "--output-format", "stream-json"},
		{"codex", "app-server"}, {"codex", "exec", "--json", "-"},
	} {
		dir := t.TempDir()
		bin := filepath.Join(dir, args[0])
		if err := os.Symlink(exe, bin); err != nil {
			t.Fatal(err)
		}
		stamp := filepath.Join(dir, "stamp.json")
		cmd := exec.Command(bin, args[1:]...)
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0", SoloEnv+"=1", LinesEnv+"=300", StampEnv+"="+stamp, StampTextEnv+"=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			n++
			if !json.Valid(sc.Bytes()) {
				t.Errorf("%v: line %d is not JSON: %s", args, n, sc.Bytes())
			}
		}
		st, err := readStamp(stamp)
		if err != nil {
			t.Fatal(err)
		}
		if st.Lines != 300 || st.TotalLines != n || st.FirstEventNs == 0 || st.FirstBodyNs < st.FirstEventNs {
			t.Errorf("%v: stamp %+v for %d lines printed", args, st, n)
		}
	}
}

// PERF-3: serve's steady p99 counts only the lines sent within its
// window, so the bursts of runs starting and ending together do not
// decide it.
func TestPERF3_SteadyP99KeepsTheMiddle(t *testing.T) {
	ms := int64(time.Millisecond)
	var lat, sent []int64
	for i := range 1000 {
		at := int64(i) * ms // one line a millisecond for a second
		l := 5 * ms
		if i < 100 || i >= 900 {
			l = 300 * ms // the start's and the end's bursts
		}
		lat, sent = append(lat, l), append(sent, at)
	}
	if got := steadyP99(lat, sent, 100*ms, 899*ms); got != 5 {
		t.Errorf("steady p99 %v ms, want 5 (the bursts left out)", got)
	}
	if got := steadyP99(lat, sent, 0, 999*ms); got != 300 {
		t.Errorf("p99 of every line %v ms, want 300", got)
	}
	if got := steadyP99(lat, sent, 2000*ms, 1000*ms); got != 0 {
		t.Errorf("an empty window gave %v ms, want 0", got)
	}
}
