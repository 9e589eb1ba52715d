//go:build linux

package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Config is one harness run.
type Config struct {
	// Drover is the drover executable measured; Fake the fake's (see Env).
	Drover, Fake string
	// FakeRole is passed to the fake as RoleEnv (for a test binary).
	FakeRole string
	// Dir is where scratch directories go ("" for the system's).
	Dir string
	// Shapes are measured on Lines body lines each, Reps times,
	// interleaved: shape A drover, shape A pipe, shape B drover, … per
	// repetition. TextChars, when not 0, overrides the shapes' text length.
	Shapes    []Shape
	Lines     int
	Reps      int
	TextChars int
	// Cancel runs the cancellation measurements, with this many children.
	Cancel         bool
	CancelChildren int
	// Serve, when set, runs the serve scenario.
	Serve *ServeConfig
	// ProfileDir, when set, gets CPU and heap profiles of one more drover
	// run per shape, run with ProfileDrover (drover built with
	// internal/testkit/bench/testdata/profmain; see docs/performance.md).
	ProfileDir, ProfileDrover string
	// Log, when set, is told of each measurement as it ends.
	Log io.Writer
}

// Report is everything a harness run measured.
type Report struct {
	Machine Machine        `json:"machine"`
	Lines   int            `json:"lines"`
	Reps    int            `json:"reps"`
	Shapes  []ShapeReport  `json:"shapes,omitempty"`
	Cancel  []CancelResult `json:"cancel,omitempty"`
	Serve   *ServeResult   `json:"serve,omitempty"`
	// Profiles lists the profile files written.
	Profiles []string `json:"profiles,omitempty"`
}

// Machine says where the figures were measured.
type Machine struct {
	OS, Arch string
	CPUs     int
	CPU      string
	Go       string
	Drover   string
}

// ShapeReport is one shape's repetitions and their medians.
type ShapeReport struct {
	Shape       string  `json:"shape"`
	Line        string  `json:"line"`
	TargetRatio float64 `json:"targetRatio"`
	// Drover and Pipe are the medians of each figure over the
	// repetitions; Ratio and StreamRatio the medians of each
	// repetition's drover/pipe ratio of LinesPerSec and
	// StreamLinesPerSec.
	Drover      Sample   `json:"drover"`
	Pipe        Sample   `json:"pipe"`
	Ratio       float64  `json:"ratio"`
	StreamRatio float64  `json:"streamRatio"`
	Runs        []Sample `json:"runs"`
	Pipes       []Sample `json:"pipes"`
	// FirstEventMs is the median first-event latency of short runs
	// (QuietLines lines) whose fake pauses QuietPause after the line of
	// the first event, as a real CLI waits for its model: the first line
	// alone. Drover.FirstEventMs is the same under the full run's flood.
	FirstEventMs float64  `json:"firstEventMs"`
	Quiet        []Sample `json:"quiet"`
}

// The quiet runs that measure the first event's latency alone.
const (
	QuietLines = 10
	QuietPause = 100 * time.Millisecond
)

// Targets (docs/performance.md) that the report marks.
const (
	// TargetRSS is the peak RSS of a drover run at 100k lines.
	TargetRSS = 25 << 20
	// TargetFirstEventMs is the first event's latency.
	TargetFirstEventMs = 2.0
	// TargetServeRSS and TargetServeP99Ms are the serve scenario's.
	TargetServeRSS   = 150 << 20
	TargetServeP99Ms = 50.0
)

// Run runs the harness.
func Run(ctx context.Context, cfg Config) (Report, error) {
	rep := Report{Machine: machine(cfg.Drover), Lines: cfg.Lines, Reps: cfg.Reps}
	e, err := NewEnv(cfg.Drover, cfg.Fake, cfg.Dir)
	if err != nil {
		return rep, err
	}
	e.FakeRole = cfg.FakeRole
	defer e.Close()
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	for _, s := range cfg.Shapes {
		rep.Shapes = append(rep.Shapes, ShapeReport{Shape: s.Name, Line: s.Line, TargetRatio: s.TargetRatio})
	}
	for r := range cfg.Reps {
		for i, s := range cfg.Shapes {
			d, err := e.RunDrover(ctx, s, cfg.Lines, cfg.TextChars, "")
			if err != nil {
				return rep, fmt.Errorf("drover run, %s, repetition %d: %w", s.Name, r+1, err)
			}
			p, err := e.RunPipe(ctx, s, cfg.Lines, cfg.TextChars)
			if err != nil {
				return rep, fmt.Errorf("pipe, %s, repetition %d: %w", s.Name, r+1, err)
			}
			q, err := e.RunDrover(ctx, s, QuietLines, cfg.TextChars, "", PauseEnv+"="+QuietPause.String())
			if err != nil {
				return rep, fmt.Errorf("drover run (first event), %s, repetition %d: %w", s.Name, r+1, err)
			}
			sr := &rep.Shapes[i]
			sr.Runs, sr.Pipes, sr.Quiet = append(sr.Runs, d), append(sr.Pipes, p), append(sr.Quiet, q)
			logf("%s #%d: drover %.0f lines/s (%.2f s, %.1f MB), pipe %.0f lines/s (%.2f s): %.1f%%",
				s.Name, r+1, d.LinesPerSec, d.WallSec, float64(d.MaxRSS)/(1<<20), p.LinesPerSec, p.WallSec, 100*d.LinesPerSec/p.LinesPerSec)
		}
	}
	for i := range rep.Shapes {
		rep.Shapes[i].summarize()
	}
	if cfg.Cancel {
		for _, ignore := range []bool{false, true} {
			c, err := e.RunCancel(ctx, cfg.CancelChildren, ignore)
			rep.Cancel = append(rep.Cancel, c)
			if err != nil {
				return rep, err
			}
			logf("cancel (%s): group gone in %.1f ms, drover exited in %.1f ms", c.Variant, c.GoneMs, c.ExitMs)
		}
	}
	if cfg.Serve != nil {
		logf("serve: %d runs, %g lines/s each, for %v", cfg.Serve.Runs, cfg.Serve.Rate, cfg.Serve.Duration)
		s, err := e.RunServe(ctx, *cfg.Serve)
		rep.Serve = &s
		if err != nil {
			return rep, err
		}
	}
	if cfg.ProfileDir != "" {
		files, err := e.profile(ctx, cfg)
		rep.Profiles = files
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// Environment of a drover built with internal/testkit/bench/testdata/profmain.
const (
	// CPUProfileEnv names the file of a CPU profile of the whole process.
	CPUProfileEnv = "DROVERTEST_BENCH_CPUPROFILE"
	// HeapProfileEnv names the file prefix of two heap profiles: PREFIX-peak
	// (taken when the live heap was largest) and PREFIX-end (at exit, after
	// a GC: its alloc_space is everything allocated).
	HeapProfileEnv = "DROVERTEST_BENCH_HEAPPROFILE"
	// TraceEnv names the file of an execution trace of the whole process.
	TraceEnv = "DROVERTEST_BENCH_TRACE"
)

// profile runs each shape once more with the profiling drover.
func (e *Env) profile(ctx context.Context, cfg Config) ([]string, error) {
	if cfg.ProfileDrover == "" {
		return nil, fmt.Errorf("profiles need a drover built with internal/testkit/bench/testdata/profmain (scripts/bench --profile builds one)")
	}
	dir, err := filepath.Abs(cfg.ProfileDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, s := range cfg.Shapes {
		cpu := filepath.Join(dir, s.Name+".cpu.pprof")
		heap := filepath.Join(dir, s.Name+".heap")
		smp, err := e.RunDrover(ctx, s, cfg.Lines, cfg.TextChars, cfg.ProfileDrover, CPUProfileEnv+"="+cpu, HeapProfileEnv+"="+heap)
		if err != nil {
			return files, fmt.Errorf("profile %s: %w", s.Name, err)
		}
		files = append(files, cpu, heap+"-peak.pprof", heap+"-end.pprof")
		// Apart: tracing slows the run, which the profiles would show.
		trc := filepath.Join(dir, s.Name+".trace")
		if _, err := e.RunDrover(ctx, s, cfg.Lines, cfg.TextChars, cfg.ProfileDrover, TraceEnv+"="+trc); err != nil {
			return files, fmt.Errorf("trace %s: %w", s.Name, err)
		}
		files = append(files, trc)
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "profile %s: %.0f lines/s under the profiler, %.1f MB peak RSS\n", s.Name, smp.LinesPerSec, float64(smp.MaxRSS)/(1<<20))
		}
	}
	return files, nil
}

// summarize sets the medians.
func (r *ShapeReport) summarize() {
	med := func(samples []Sample, f func(Sample) float64) float64 {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = f(s)
		}
		return median(v)
	}
	medInt := func(samples []Sample, f func(Sample) int64) int64 {
		return int64(med(samples, func(s Sample) float64 { return float64(f(s)) }))
	}
	for _, pair := range []struct {
		out     *Sample
		samples []Sample
	}{{&r.Drover, r.Runs}, {&r.Pipe, r.Pipes}} {
		ss := pair.samples
		if len(ss) == 0 {
			continue
		}
		*pair.out = Sample{
			Lines: ss[0].Lines, Printed: ss[0].Printed, Types: ss[0].Types, Status: ss[0].Status,
			LineBytes:         med(ss, func(s Sample) float64 { return s.LineBytes }),
			WallSec:           med(ss, func(s Sample) float64 { return s.WallSec }),
			LinesPerSec:       med(ss, func(s Sample) float64 { return s.LinesPerSec }),
			StreamSec:         med(ss, func(s Sample) float64 { return s.StreamSec }),
			StreamLinesPerSec: med(ss, func(s Sample) float64 { return s.StreamLinesPerSec }),
			FirstEventMs:      med(ss, func(s Sample) float64 { return s.FirstEventMs }),
			MaxRSS:            medInt(ss, func(s Sample) int64 { return s.MaxRSS }),
			FakeMaxRSS:        medInt(ss, func(s Sample) int64 { return s.FakeMaxRSS }),
			CPUSec:            med(ss, func(s Sample) float64 { return s.CPUSec }),
		}
	}
	var ratios, stream []float64
	for i := range min(len(r.Runs), len(r.Pipes)) {
		ratios = append(ratios, r.Runs[i].LinesPerSec/r.Pipes[i].LinesPerSec)
		stream = append(stream, r.Runs[i].StreamLinesPerSec/r.Pipes[i].StreamLinesPerSec)
	}
	r.Ratio, r.StreamRatio = median(ratios), median(stream)
	r.FirstEventMs = med(r.Quiet, func(s Sample) float64 { return s.FirstEventMs })
}

// median of v (the mean of the middle two for an even count); 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// machine describes this machine and the drover measured.
func machine(drover string) Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(), Drover: drover}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return m
}
